"""Short cuts inside one process (``orijs_sync.engine.local``), on real Redis: an add hands
its job to a free Worker of the process in the add's own call, and a Worker's write
settles the waiters of the job in the process's QueueEvents as it returns. Redis holds
what the long way writes; the events stream still delivers every event once."""
from __future__ import annotations

import os
import threading
from typing import Any, List

import pytest

from orijs_sync import FlowProducer, Queue, QueueEvents, Worker, errors
from orijs_sync.engine.local import LOCAL, Handing
from orijs_sync.events.completion_tracker import CompletionTracker
from orijs_sync.testing import wait_until

from engine_state import waits_on_marker
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow


def counting(worker: Worker) -> List[str]:
    """The per-job scripts ``worker`` runs, by name."""
    calls: List[str] = []
    run = worker._run_hot_script

    def counted(name: str, keys: List[str], args: List[Any]) -> Any:
        calls.append(name)
        return run(name, keys, args)
    worker._run_hot_script = counted          # type: ignore[method-assign]
    return calls


def test_an_add_hands_its_job_to_a_free_worker_of_the_process(queue, redis_url, qname, r):
    worker = Worker(qname, lambda job: job.data["i"] * 2, connection=redis_url, concurrency=4,
                    drain_delay=60)
    calls = counting(worker)
    with worker:
        wait_until(lambda: waits_on_marker(worker), what="the queue found empty")
        for i in range(3):
            calls.clear()
            job = queue.add("x", {"i": i})
            wait_until(lambda: queue.get_job_state(job.id) == "completed" and
                       worker._free == 4 and waits_on_marker(worker))
            assert r.zscore(queue.keys.marker, "0") is None     # nothing wakes a fetcher
            assert calls == ["moveToFinished"], calls      # no take of its own
            stored = queue.get_job(job.id)
            assert stored.returnvalue == i * 2 and stored.attempts_made == 1
    events = [fields["event"] for _, fields in r.xrange(queue.keys.events)]
    assert events.count("added") == events.count("active") == events.count("completed") == 3


def test_a_write_that_finds_the_queue_empty_sends_no_fetch_after_it(queue, redis_url, qname):
    """The fetcher's first take is full (one job of one slot; it would look again), the
    second job is taken by the first one's write, and the second write finds the queue
    empty: the slot it frees is left for an add to hand a job to, not taken by a fetch
    (which would race that add for it)."""
    gate = threading.Semaphore(0)
    jobs = [queue.add("x", {}) for _ in range(2)]
    worker = Worker(qname, lambda job: gate.acquire(timeout=10), connection=redis_url,
                    concurrency=1, drain_delay=60)
    calls = counting(worker)
    with worker:
        gate.release(2)
        wait_until(lambda: all(queue.get_job_state(j.id) == "completed" for j in jobs))
        wait_until(lambda: worker._free == 1 and waits_on_marker(worker), 20,
                   "the slot free, the queue found empty")
        assert calls == ["moveToActive", "moveToFinished", "moveToFinished"], calls
        calls.clear()
        job = queue.add("x", {})
        gate.release()
        wait_until(lambda: queue.get_job_state(job.id) == "completed" and
                   worker._free == 1 and waits_on_marker(worker))
        assert calls == ["moveToFinished"], calls      # handed by the add


def test_a_wait_is_settled_by_the_write_of_a_worker_of_the_process(queue, redis_url, qname):
    """The events thread is never started: only the worker's write can settle the wait."""
    events = QueueEvents(qname, connection=redis_url, autorun=False)

    def handler(job: Any) -> Any:
        if job.name == "bad":
            raise ValueError("no")
        return {"got": job.data}
    try:
        with Worker(qname, handler, connection=redis_url):
            assert queue.add("x", [1]).wait_until_finished(events, 10) == {"got": [1]}
            with pytest.raises(errors.JobFailed, match="no"):
                queue.add("bad", {}).wait_until_finished(events, 10)
    finally:
        events.close()


def test_a_wait_that_starts_after_the_write_of_a_removed_job_is_settled_by_it(
        queue, redis_url, qname):
    """The events thread is never started and the job is removed as it completes: the
    outcome a Worker of the process wrote is remembered for a wait that starts later
    (while an events thread rests, nothing else tells it)."""
    events = QueueEvents(qname, connection=redis_url, autorun=False)
    try:
        with Worker(qname, lambda job: job.data * 2, connection=redis_url):
            job = queue.add("x", 21, remove_on_complete=True)
            wait_until(lambda: queue.get_job_state(job.id) == "unknown", 10, "removed")
            assert job.wait_until_finished(events, 5) == 42
    finally:
        events.close()


def test_the_stream_still_delivers_each_outcome_once(queue, redis_url, qname):
    seen: List[str] = []
    with QueueEvents(qname, connection=redis_url) as events, \
            Worker(qname, lambda job: None, connection=redis_url):
        events.on("completed", lambda job_id, value: seen.append(job_id))
        ids = [queue.add("x", {"i": i}).wait_until_finished(events, 10) or None
               for i in range(20)]
        assert ids == [None] * 20
        assert events.catch_up(10)
    assert len(seen) == 20 and len(set(seen)) == 20


def test_an_older_outcome_of_the_same_id_settles_no_newer_wait(queue, redis_url, qname, r):
    """A write of an earlier run, told after a new add of the same id, is older than
    that add's "added" event: the waiter of the new run is left waiting."""
    events = QueueEvents(qname, connection=redis_url, autorun=False)
    try:
        job = queue.add("x", {}, job_id="same")
        fut = events._job_future(queue, "same", job._added_event)
        earlier = {"event": "completed", "jobId": "same", "returnvalue": "1", "prev": "active"}
        events._settle_written(queue.keys.events, "1-0", earlier)
        assert not fut.done()
        events._settle_written(queue.keys.events, "99999999999999-0", earlier)
        assert fut.result(1) == 1
    finally:
        events.close()


def test_a_flow_hands_its_leaves_to_free_workers_of_the_process(redis_url, qname, r):
    """``FlowProducer.add``'s own call takes each leaf (it waits) for a free Worker of
    this process serving its queue: no fetch of the Worker's own takes them."""
    flows = FlowProducer(redis_url)
    done = threading.Event()
    leaves = Worker(f"{qname}.leaf", lambda job: job.data, connection=redis_url,
                    concurrency=4, drain_delay=60)
    calls = counting(leaves)
    with leaves, Worker(qname, lambda job: done.set(), connection=redis_url):
        wait_until(lambda: waits_on_marker(leaves), what="the leaves' queue found empty")
        calls.clear()
        node = flows.add({"name": "root", "queue_name": qname, "children": [
            {"name": "leaf", "queue_name": f"{qname}.leaf", "data": i} for i in (1, 2)]})
        assert done.wait(10)
        wait_until(lambda: leaves._free == 4 and waits_on_marker(leaves), 20,
                   "every slot back, the queue found empty")
        assert r.zscore(flows.queue(f"{qname}.leaf").keys.marker, "0") is None
        assert calls == ["moveToFinished", "moveToFinished"], calls
        assert sorted(node.job.get_children_values().values()) == [1, 2]
    flows.close()


def test_a_refused_flow_or_a_delayed_leaf_takes_nothing(redis_url, qname, queue):
    flows = FlowProducer(redis_url)
    with Worker(qname, lambda job: "ran", connection=redis_url, concurrency=2) as worker:
        with pytest.raises(errors.ScriptError, match="parent job does not exist"):
            flows.add({"name": "orphan", "queue_name": qname,
                       "opts": {"parent": {"id": "missing", "queue": f"bull:{qname}"}}})
        assert queue.get_job_counts()["waiting"] == 0
        wait_until(lambda: worker._free == 2, 5, "both slots free")    # none kept
        node = flows.add({"name": "later", "queue_name": qname, "opts": {"delay": 0.3}})
        assert queue.get_job_state(node.job.id) == "delayed"
        wait_until(lambda: worker._free == 2, 5, "both slots free")
        wait_until(lambda: queue.get_job_state(node.job.id) == "completed")
    flows.close()


def test_nothing_taken_gives_the_slot_back(queue, redis_url, qname, r):
    """A paused queue (or a delayed job) gives the handing add nothing: the slot comes
    back, and the job runs on resume."""
    with Worker(qname, lambda job: "ran", connection=redis_url, concurrency=2) as worker:
        queue.pause()
        job = queue.add("x", {})
        assert queue.get_job_state(job.id) == "waiting"      # BullMQ v5: paused in wait
        later = queue.add("x", {}, delay=0.2)
        assert queue.get_job_state(later.id) == "delayed"
        wait_until(lambda: worker._free == 2, 5, "both slots free")
        queue.resume()
        wait_until(lambda: queue.get_job_state(job.id) == "completed")
        wait_until(lambda: queue.get_job_state(later.id) == "completed")


def test_a_busy_or_paused_worker_is_not_handed_jobs(queue, redis_url, qname):
    release = threading.Event()
    with Worker(qname, lambda job: release.wait(10), connection=redis_url,
                concurrency=1) as worker:
        first = queue.add("x", {})
        wait_until(lambda: queue.get_job_state(first.id) == "active")
        second = queue.add("x", {})            # its one slot is busy
        assert queue.get_job_state(second.id) == "waiting"
        worker.pause(wait=False)
        release.set()
        wait_until(lambda: queue.get_job_state(first.id) == "completed")
        wait_until(lambda: worker._free == 1, 5, "the slot free")
        third = queue.add("x", {})
        assert queue.get_job_state(third.id) == "waiting" and worker._free == 1
        worker.resume()
        wait_until(lambda: queue.get_job_state(third.id) == "completed")


def test_a_job_handed_to_a_worker_closing_meanwhile_is_not_lost(queue, redis_url, qname, r):
    """The add took the job for a worker whose pool shut down before the hand-off: the
    add still returns it, and it goes back to wait once its lock expires (stalled)."""
    worker = Worker(qname, lambda job: "late", connection=redis_url, lock_duration=1,
                    stalled_interval=0.5).start()
    handing = Handing()
    assert handing.reserve(queue.connection, queue.keys.marker)
    assert handing.workers == [worker]
    assert worker.close(timeout=0.2) is False          # its reserved slot is never freed
    call = queue._add_call("x", {}, {})
    job = queue._added(call, call.run_handing(queue.scripts, queue.connection, handing))
    assert queue.get_job_state(job.id) == "active"    # taken in Redis, run by nobody
    with Worker(qname, lambda job: "recovered", connection=redis_url, lock_duration=1,
                stalled_interval=0.5):
        wait_until(lambda: queue.get_job_state(job.id) == "completed", 20)
    assert queue.get_job(job.id).returnvalue == "recovered"


def test_a_forked_child_hands_nothing_to_its_parents_worker(queue, redis_url, qname):
    with Worker(qname, lambda job: os.getpid(), connection=redis_url) as worker:
        assert LOCAL.taker(queue.connection, queue.keys.marker) is worker
        worker._give_back_slots(1)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:                                    # the child: no worker of its own
            ok = LOCAL.taker(queue.connection, queue.keys.marker) is None
            job = Queue(qname, connection=redis_url).add("x", {})
            os.write(write, f"{int(ok)} {job.id}".encode())
            os._exit(0)
        os.close(write)
        ok, job_id = os.read(read, 100).decode().split()
        os.close(read)
        os.waitpid(pid, 0)
        assert ok == "1"
        wait_until(lambda: queue.get_job_state(job_id) == "completed")
        assert queue.get_job(job_id).returnvalue == os.getpid()   # run by the parent


class NotTailing(QueueEvents):
    """A QueueEvents whose events thread never runs: only writes of this process's
    Workers reach it (``on_written``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **dict(kwargs, autorun=False))

    def start(self) -> "NotTailing":
        return self


def test_on_written_tells_outcomes_written_here(queue, redis_url, qname):
    events = NotTailing(qname, connection=redis_url)
    told: List[Any] = []
    with pytest.raises(errors.InvalidArgumentType):
        events.on_written("not a function")          # type: ignore[arg-type]
    events.on_written(lambda ev: told.append((ev.event, ev.job_id, ev.value,
                                              threading.current_thread().name)))
    try:
        with Worker(qname, lambda job: job.data * 3, connection=redis_url) as worker:
            job = queue.add("x", 2)
            wait_until(lambda: len(told) == 1)
        assert told == [("completed", job.id, 6, told[0][3])]
        assert told[0][3].startswith(f"orijs-worker-{worker.name}")
    finally:
        events.close()


def test_an_emit_wait_is_settled_by_the_write_here(queue, redis_url, qname):
    """The event provider's CompletionTracker settles from ``on_written``: with no
    events thread reading the stream, the registration still settles."""
    tracker = CompletionTracker(redis_url, queue_events_class=NotTailing).start()
    got: List[Any] = []
    try:
        tracker.register(qname, "c1", got.append, got.append, timeout=10)
        with Worker(qname, lambda job: {"ok": job.data}, connection=redis_url):
            job = queue.add("x", 1)
            tracker.map_job_id(qname, job.id, "c1")        # before or after it finished
            wait_until(lambda: got != [])
        assert got == [{"ok": 1}]
        assert tracker.sizes()["pending"] == 0
    finally:
        tracker.stop()


def test_a_workflow_is_settled_by_the_write_here(redis_url, namespace):
    """The workflow provider settles its handles from ``on_written`` too: with no
    events thread reading the stream, a workflow run here still settles."""
    chain = (Workflow("Local")
             .step("a", lambda ctx: {"a": ctx.data["n"]})
             .step("b", lambda ctx: ctx.get_result("a")["a"] + 1))
    provider = BullMQWorkflowProvider(redis_url, queue_prefix=f"{namespace}.wf",
                                      queue_events_class=NotTailing)
    provider.register(chain)
    with provider:
        for n in (1, 5):
            result = provider.execute(chain, {"n": n}).result(timeout=10)
            assert result["b"] == n + 1, result
