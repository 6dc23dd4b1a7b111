"""Worker events with BullMQ's meanings (worker.on): each emitted where BullMQ emits it,
on real Redis."""
from __future__ import annotations

import threading
import time

import pytest

from orijs_sync import Worker, errors
from orijs_sync.testing import wait_until


def _recorder(worker, *names):
    seen = []
    for name in names:
        worker.on(name, lambda *args, name=name: seen.append((name, *args)))
    return seen


def test_ready_closing_and_closed_frame_a_workers_life(redis_url, qname):
    worker = Worker(qname, lambda job: 1, connection=redis_url)
    seen = _recorder(worker, "ready", "closing", "closed")
    worker.start()
    assert seen == [("ready",)]
    worker.close()
    worker.close()                  # idempotent: no second closing
    assert seen == [("ready",), ("closing", "closing queue"), ("closed",)]


def test_paused_comes_once_the_active_jobs_end_and_resumed_after(queue, redis_url, qname):
    release = threading.Event()
    started = threading.Event()

    def handler(job):
        started.set()
        release.wait(10)
        return 1

    with Worker(qname, handler, connection=redis_url) as worker:
        seen = _recorder(worker, "paused", "resumed", "completed")
        queue.add("x", {})
        assert started.wait(10)
        pausing = threading.Thread(target=worker.pause)
        pausing.start()
        time.sleep(0.3)
        assert seen == []                   # waits for the active job
        release.set()
        pausing.join(10)
        assert [s[0] for s in seen] == ["completed", "paused"]
        worker.pause()                      # already paused: nothing
        worker.resume()
        worker.resume()                     # not paused: nothing
        assert [s[0] for s in seen] == ["completed", "paused", "resumed"]


def test_progress_of_a_handlers_job(queue, redis_url, qname, events):
    on_threads = set()

    def handler(job):
        job.update_progress(50)
        job.update_progress({"step": 2})
        return 1

    added = queue.add("x", {})
    with Worker(qname, handler, connection=redis_url) as worker:
        seen = []
        worker.on("progress", lambda job, value: (seen.append((job.id, value)),
                                                  on_threads.add(threading.current_thread().name)))
        added.wait_until_finished(events, timeout=10)
    assert seen == [(added.id, 50), (added.id, {"step": 2})]
    assert all(name.startswith("orijs-worker") for name in on_threads)     # the handler's thread


def test_progress_of_a_manual_job(queue, redis_url, qname):
    with Worker(qname, None, connection=redis_url) as manual:
        seen = _recorder(manual, "progress")
        queue.add("x", {})
        job = manual.get_next_job("t")
        job.update_progress(10)
        queue.get_job(job.id).update_progress(20)      # a Queue's job: no worker to tell
        assert seen == [("progress", job, 10)]
        job.move_to_completed(1, "t")


def test_progress_is_refused_in_process_mode(redis_url, qname):
    worker = Worker(qname, "json:dumps", connection=redis_url, processes=1)
    with pytest.raises(errors.InvalidArgument, match="process mode"):
        worker.on("progress", print)


def test_lock_renewal_failed_names_the_jobs_whose_lock_was_gone(queue, redis_url, qname, r):
    release = threading.Event()
    started = threading.Event()

    def handler(job):
        started.set()
        release.wait(10)
        return 1

    with Worker(qname, handler, connection=redis_url, lock_duration=0.8) as worker:
        seen = _recorder(worker, "lock_renewal_failed")
        lost = []
        worker.on("error", lambda exc: lost.append(exc))
        added = queue.add("x", {})
        assert started.wait(10)
        r.set(queue.keys.lock(added.id), "someone-else")      # another worker took it
        wait_until(lambda: seen, 5)
        time.sleep(0.5)                                       # renewals go on: told once
        release.set()
    assert seen == [("lock_renewal_failed", [added.id])]
    assert any(isinstance(exc, errors.LockLost) for exc in lost)


def test_stalled_names_the_job_the_check_moved_back(queue, redis_url, qname):
    with Worker(qname, None, connection=redis_url, lock_duration=0.2) as manual:
        added = queue.add("x", {})
        manual.get_next_job("t")            # its lock is never renewed: it stalls
        with Worker(qname, lambda job: 1, connection=redis_url, stalled_interval=0.2) as worker:
            seen = _recorder(worker, "stalled")
            wait_until(lambda: ("stalled", added.id) in seen, 10)


def test_active_and_drained(queue, redis_url, qname, events):
    added = [queue.add("x", {"i": i}) for i in range(3)]
    with Worker(qname, lambda job: 1, connection=redis_url, concurrency=3) as worker:
        seen = _recorder(worker, "active", "drained")
        for job in added:
            job.wait_until_finished(events, timeout=10)
        wait_until(lambda: ("drained",) in seen, 10)
        late = queue.add("late", {})
        late.wait_until_finished(events, timeout=10)
        wait_until(lambda: seen.count(("drained",)) == 2, 10)
    assert ("active", late.id) in [(name, args[0].id) for name, *args in seen if args]


def test_listeners_added_while_events_fire_and_failing_listeners(queue, redis_url, qname):
    n = 100
    calls = []

    def boom(job, result):
        raise RuntimeError("a listener's bug")

    queue.add_bulk([{"name": "x", "data": {}} for _ in range(n)])
    with Worker(qname, lambda job: 1, connection=redis_url, concurrency=4) as worker:
        worker.on("completed", boom)
        for _ in range(50):               # races the handler threads' emits
            worker.on("completed", lambda job, result: calls.append(job.id))
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == n, 30)
    assert calls                          # the later listeners ran, past the failing one


def test_unknown_events_are_refused_naming_the_python_spelling(redis_url, qname):
    worker = Worker(qname, lambda job: 1, connection=redis_url)
    with pytest.raises(errors.InvalidArgument, match="lock_renewal_failed"):
        worker.on("lockRenewalFailed", print)
    with pytest.raises(errors.InvalidArgumentType, match="fn"):
        worker.on("ready", None)
