"""Worker: threads, outcomes, locks and shutdown, on real Redis."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import List

import pytest

from orijs_sync import Worker, errors
from orijs_sync.engine.local import LOCAL
from orijs_sync.testing import orijs_threads, wait_until

from engine_state import waits_on_marker


def test_processes_a_job_and_stores_the_result_as_bullmq(queue, events, redis_url, qname, r):
    job = queue.add("send", {"to": "a@example.com"})
    with Worker(qname, lambda j: {"sent": j.data["to"]}, connection=redis_url):
        assert job.wait_until_finished(events, timeout=10) == {"sent": "a@example.com"}
    stored = r.hgetall(queue.keys.job(job.id))
    assert json.loads(stored["returnvalue"]) == {"sent": "a@example.com"}
    assert stored["atm"] == "1" and stored["ats"] == "1"
    assert int(stored["finishedOn"]) >= int(stored["processedOn"]) >= job.timestamp
    assert r.zscore(queue.keys.completed, job.id) == int(stored["finishedOn"])
    assert not r.exists(queue.keys.lock(job.id))
    entries = [f for _, f in r.xrange(queue.keys.events)]
    assert {"event": "active", "jobId": job.id, "prev": "waiting"} in entries
    assert {"event": "completed", "jobId": job.id, "returnvalue": '{"sent":"a@example.com"}',
            "prev": "active"} in entries


def test_handler_exception_fails_with_reason_and_stacktrace(queue, events, redis_url, qname):
    def boom(job):
        raise RuntimeError("card declined")
    job = queue.add("charge", {})
    with Worker(qname, boom, connection=redis_url):
        with pytest.raises(errors.JobFailed, match="card declined") as info:
            job.wait_until_finished(events, timeout=10)
    assert info.value.failed_reason == "card declined"
    failed = queue.get_job(job.id)
    assert failed.get_state() == "failed" and failed.failed_reason == "card declined"
    assert "RuntimeError: card declined" in failed.stacktrace[-1]
    assert "in boom" in failed.stacktrace[-1]


def test_a_return_value_json_cannot_hold_fails_the_job_clearly(queue, events, redis_url, qname):
    job = queue.add("x", {}, attempts=3)
    with Worker(qname, lambda j: {"when": object()}, connection=redis_url):
        with pytest.raises(errors.JobFailed, match="return value of job .* cannot be stored as JSON"):
            job.wait_until_finished(events, timeout=10)
    assert queue.get_job(job.id).attempts_made == 1  # not retried: it would fail the same way


def test_concurrency_runs_jobs_in_parallel_threads(queue, redis_url, qname):
    n = 16
    barrier = threading.Barrier(n, timeout=20)
    threads = set()

    def handler(job):
        threads.add(threading.get_ident())
        barrier.wait()  # passes only if all n run at once
        return job.id

    queue.add_bulk([{"name": "x", "data": {}} for _ in range(n)])
    with Worker(qname, handler, connection=redis_url, concurrency=n):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == n, 30)
    assert len(threads) == n


def test_many_jobs_all_complete_once(queue, redis_url, qname):
    seen = []
    lock = threading.Lock()

    def handler(job):
        with lock:
            seen.append(job.data["i"])
        return job.data["i"]

    queue.add_bulk([{"name": "x", "data": {"i": i}, "opts": {"remove_on_complete": True}}
                    for i in range(3000)])
    with Worker(qname, handler, connection=redis_url, concurrency=8):
        wait_until(lambda: len(seen) == 3000 and queue.get_job_counts("active")["active"] == 0, 60)
    assert sorted(seen) == list(range(3000))
    assert queue.get_job_counts()["waiting"] == 0


def test_close_lets_active_jobs_finish_and_joins_every_thread(queue, redis_url, qname):
    started = threading.Event()

    def slow(job):
        started.set()
        time.sleep(1.0)
        return "done"

    job = queue.add("slow", {})
    worker = Worker(qname, slow, connection=redis_url, concurrency=4).start()
    assert started.wait(10)
    assert worker.close() is True
    assert queue.get_job(job.id).returnvalue == "done"
    assert orijs_threads() == []
    assert worker.close() is True  # idempotent


def test_close_returns_quickly_when_idle(redis_url, qname):
    worker = Worker(qname, lambda j: None, connection=redis_url, drain_delay=30).start()
    time.sleep(0.3)  # let the fetcher block on the marker
    began = time.monotonic()
    worker.close()
    assert time.monotonic() - began < 5, "close must interrupt the blocking fetch"
    assert orijs_threads() == []


def test_close_with_timeout_gives_up_on_a_stuck_job(queue, redis_url, qname):
    release = threading.Event()
    job = queue.add("stuck", {})
    worker = Worker(qname, lambda j: release.wait(30), connection=redis_url).start()
    wait_until(lambda: queue.get_job_state(job.id) == "active")
    assert worker.close(timeout=0.3) is False
    release.set()


def test_a_worker_starts_once(redis_url, qname):
    worker = Worker(qname, lambda j: None, connection=redis_url)
    with worker:
        with pytest.raises(errors.InvalidStateError):
            worker.start()


def test_lock_is_renewed_while_a_long_job_runs(queue, events, redis_url, qname, r):
    def long(job):
        time.sleep(2.5)
        return "ok"

    job = queue.add("long", {})
    # A second worker checks for stalled jobs often: it must not take the job.
    with Worker(qname, long, connection=redis_url, lock_duration=1.0), \
            Worker(qname, long, connection=redis_url, stalled_interval=0.3):
        assert job.wait_until_finished(events, timeout=15) == "ok"
    assert queue.get_job(job.id).stalled_counter == 0
    stalled = [f for _, f in r.xrange(queue.keys.events) if f["event"] == "stalled"]
    assert stalled == []


def test_events_stream_is_trimmed_to_the_queue_max_length(queue, redis_url, qname, r):
    r.hset(queue.keys.meta, "opts.maxLenEvents", 100)
    queue.add_bulk([{"name": "x", "data": {}} for _ in range(400)])
    with Worker(qname, lambda j: None, connection=redis_url, concurrency=4):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 400, 30)
    assert r.xlen(queue.keys.events) < 400  # ~ trimming keeps about 100 plus a macro node


def test_listeners_see_outcomes(queue, redis_url, qname):
    seen = []
    worker = Worker(qname, lambda j: 1 / j.data["d"], connection=redis_url)
    worker.on("completed", lambda job, result: seen.append(("completed", job.id, result)))
    worker.on("failed", lambda job, exc: seen.append(("failed", job.id, type(exc).__name__)))
    ok, bad = queue.add("x", {"d": 2}), queue.add("x", {"d": 0})
    with worker:
        wait_until(lambda: len(seen) == 2)
    assert ("completed", ok.id, 0.5) in seen
    assert ("failed", bad.id, "ZeroDivisionError") in seen
    with pytest.raises(ValueError, match="unknown worker event"):
        worker.on("nope", print)


@pytest.mark.parametrize("kwargs", [{"concurrency": 0}, {"concurrency": 1.5},
                                    {"lock_duration": -1}, {"limiter": {"max": 0, "duration": 1}},
                                    {"max_stalled_count": -1}])
def test_bad_worker_options_are_refused(qname, kwargs):
    with pytest.raises((TypeError, ValueError)):
        Worker(qname, lambda j: None, **kwargs)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_closes_gracefully_on_sigterm(queue, redis_url, qname, tmp_path, sig):
    script = tmp_path / "run_worker.py"
    script.write_text(textwrap.dedent(f"""
        import time
        from orijs_sync import Worker
        def slow(job):
            time.sleep(1.5)
            return "finished"
        Worker({qname!r}, slow, connection={redis_url!r}).run()
        print("closed", flush=True)
    """))
    job = queue.add("slow", {})
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: queue.get_job_state(job.id) == "active", 20)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "closed" in out
    assert queue.get_job(job.id).returnvalue == "finished"


def test_an_idle_worker_outlasts_redis_py_socket_timeouts(queue, redis_url, qname):
    errors_seen = []
    worker = Worker(qname, lambda j: "late", connection=redis_url, drain_delay=6)
    worker.on("error", errors_seen.append)
    with worker:
        time.sleep(6.5)      # one full block longer than redis-py's default socket timeout
        job = queue.add("x", {})
        wait_until(lambda: queue.get_job_state(job.id) == "completed", 5)
    assert errors_seen == []


def test_drained_is_emitted_once_per_emptying(queue, redis_url, qname):
    drained = []
    worker = Worker(qname, lambda j: None, connection=redis_url, drain_delay=0.2)
    worker.on("drained", lambda: drained.append(time.monotonic()))
    queue.add_bulk([{"name": "x", "data": {}} for _ in range(3)])
    with worker:
        wait_until(lambda: len(drained) == 1)
        time.sleep(0.6)                  # several empty fetches: still one "drained"
        assert len(drained) == 1
        queue.add("x", {})
        wait_until(lambda: len(drained) == 2)


def test_close_from_inside_a_handler_closes_once_the_handler_returns(queue, redis_url, qname):
    """Item 6: close() from a handler must not wait for its own job (a deadlock)."""
    returned = []

    def closing_handler(job):
        returned.append(worker.close())          # no timeout: waiting would be for ever
        return "done"

    worker = Worker(qname, closing_handler, connection=redis_url, drain_delay=0.5)
    job = queue.add("x", {})
    later = queue.add("x", {})
    worker.start()
    wait_until(lambda: queue.get_job_state(job.id) == "completed", 30)
    assert returned == [False]                   # closing had begun; its job was running
    wait_until(lambda: not worker.is_running and worker._state == "closed", 30)
    assert worker.close(timeout=10) is True      # idempotent, and joins the closer
    assert orijs_threads() == []
    assert queue.get_job(job.id).returnvalue == "done"
    assert queue.get_job_state(later.id) == "waiting"     # nothing fetched after close()


def test_a_lone_job_costs_one_fetch(redis_url, qname, queue, r):
    """A worker waiting on an empty queue takes a lone job in one moveToActive call: the
    call that finds nothing more to take clears the base marker its take left, so the
    worker neither looks again at once nor wakes on that marker to find nothing."""
    fetches: List[str] = []
    worker = Worker(qname, lambda job: job.data["i"], connection=redis_url, concurrency=4,
                    drain_delay=60)
    run = worker._run_hot_script

    def counted(name, keys, args):
        fetches.append(name)
        return run(name, keys, args)
    worker._run_hot_script = counted          # type: ignore[method-assign]
    with worker:
        LOCAL.remove_worker(worker)     # the adds are as another process's: no hand-off
        wait_until(lambda: waits_on_marker(worker), what="the queue found empty")
        for i in range(3):
            fetches.clear()
            queue.add("x", {"i": i})
            wait_until(lambda: queue.get_job_counts("completed")["completed"] == i + 1 and
                       worker._free == 4 and waits_on_marker(worker) and
                       r.zscore(queue.keys.marker, "0") is None)
            assert fetches.count("moveToActive") == 1, fetches
            assert fetches.count("moveToFinished") == 1, fetches
    assert r.zscore(queue.keys.marker, "0") is None


def test_a_take_leaves_the_base_marker_only_while_more_jobs_wait(redis_url, qname, queue, r):
    """A take sets the base marker ("there may be more") only when more jobs wait, and
    drops it when none is left: a marker left on an empty queue woke every worker
    blocked on it (and this worker's own fetcher) to find nothing."""
    worker = Worker(qname, lambda job: None, connection=redis_url)     # never started
    try:
        x = queue.add("x", {})
        y = queue.add("y", {}, priority=3)
        assert r.zscore(queue.keys.marker, "0") == 0
        assert [j.id for j in worker._move_to_active(1)[0]] == [x.id]
        assert r.zscore(queue.keys.marker, "0") == 0         # "y" still waits
        assert [j.id for j in worker._move_to_active(1)[0]] == [y.id]
        assert r.zscore(queue.keys.marker, "0") is None
    finally:
        worker.close()


def test_a_parent_its_last_childs_write_takes_costs_no_fetch(redis_url, qname, queue, r):
    """The flow's add takes its child for the worker, and the write of the last child
    moves the parent to wait and takes it in the same call: the worker never fetches."""
    from orijs_sync import FlowProducer
    fetches: List[str] = []
    worker = Worker(qname, lambda job: job.name, connection=redis_url, concurrency=2,
                    drain_delay=60)
    run = worker._run_hot_script

    def counted(name, keys, args):
        fetches.append(name)
        return run(name, keys, args)
    worker._run_hot_script = counted          # type: ignore[method-assign]
    with worker, FlowProducer(connection=redis_url) as flows:
        wait_until(lambda: waits_on_marker(worker), what="the queue found empty")
        fetches.clear()
        node = flows.add({"name": "parent", "queue_name": qname,
                          "children": [{"name": "child", "queue_name": qname}]})
        wait_until(lambda: queue.get_job_state(node.job.id) == "completed" and
                   worker._free == 2 and waits_on_marker(worker) and
                   r.zscore(queue.keys.marker, "0") is None,
                   what="the parent completed, the queue found empty, no marker left")
        assert fetches == ["moveToFinished", "moveToFinished"], fetches
