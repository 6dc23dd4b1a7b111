"""Cancelling running jobs (BullMQ's worker.cancelJob / cancelAllJobs and the AbortSignal
its processor receives): cooperative, the handler decides the outcome; on real Redis."""
from __future__ import annotations

import random
import threading
import time

import pytest

from orijs_sync import Worker, errors
from orijs_sync.base.cancellation import Cancellation
from orijs_sync.testing import wait_until


def _waits_for_cancel(started: threading.Event, how: str = "raise"):
    """A handler that sleeps on its cancellation, then does ``how``."""
    def handler(job):
        started.set()
        if not job.cancellation.wait(20):
            return "not cancelled"
        if how == "raise":
            job.cancellation.raise_if_set()
        if how == "unrecoverable":
            raise errors.UnrecoverableError(f"cancelled: {job.cancellation.reason}")
        return f"finished anyway ({job.cancellation.reason})"
    return handler


def test_a_cancelled_handler_that_raises_fails_its_job(queue, events, redis_url, qname):
    started = threading.Event()
    added = queue.add("long", {})
    with Worker(qname, _waits_for_cancel(started), connection=redis_url) as worker:
        assert started.wait(10)
        t0 = time.monotonic()
        assert worker.cancel_job(added.id, "user asked") is True
        with pytest.raises(errors.JobFailed, match="user asked"):
            added.wait_until_finished(events, timeout=10)
        assert time.monotonic() - t0 < 2.0
    failed = queue.get_job(added.id)
    assert failed.failed_reason == "user asked" and "JobCancelled" in failed.stacktrace[-1]


def test_a_cancelled_attempt_is_retried_like_any_failure(queue, events, redis_url, qname):
    runs = []

    def handler(job):
        runs.append(job.attempts_made)
        if job.attempts_made == 0:
            started.set()
            job.cancellation.wait(20)
            job.cancellation.raise_if_set()
        return "second run"

    started = threading.Event()
    added = queue.add("long", {}, attempts=2)
    with Worker(qname, handler, connection=redis_url) as worker:
        assert started.wait(10)
        worker.cancel_job(added.id)
        assert added.wait_until_finished(events, timeout=10) == "second run"
    assert runs == [0, 1]
    assert queue.get_job(added.id).failed_reason == "the job was cancelled"


def test_an_unrecoverable_error_stops_the_retries(queue, events, redis_url, qname):
    started = threading.Event()
    added = queue.add("long", {}, attempts=5)
    with Worker(qname, _waits_for_cancel(started, "unrecoverable"),
                connection=redis_url) as worker:
        assert started.wait(10)
        worker.cancel_job(added.id, "shutdown")
        with pytest.raises(errors.JobFailed, match="cancelled: shutdown"):
            added.wait_until_finished(events, timeout=10)
    assert queue.get_job(added.id).attempts_made == 1


def test_a_handler_that_ignores_the_cancellation_completes(queue, events, redis_url, qname):
    started = threading.Event()
    added = queue.add("long", {})
    with Worker(qname, _waits_for_cancel(started, "ignore"), connection=redis_url) as worker:
        assert started.wait(10)
        worker.cancel_job(added.id, "why")
        assert added.wait_until_finished(events, timeout=10) == "finished anyway (why)"


def test_cancel_job_is_false_for_a_job_not_run_here(queue, events, redis_url, qname):
    added = queue.add("quick", {})
    with Worker(qname, lambda job: 1, connection=redis_url) as worker:
        assert worker.cancel_job("no-such-job") is False
        added.wait_until_finished(events, timeout=10)
        assert worker.cancel_job(added.id) is False        # finished
    manual = Worker(qname, None, connection=redis_url)
    queue.add("manual", {})
    job = manual.get_next_job("t")
    assert manual.cancel_job(job.id) is False              # taken by hand: not tracked
    job.move_to_completed(1, "t")
    manual.close()


def test_cancel_all_jobs_cancels_every_running_job(queue, redis_url, qname):
    barrier = threading.Barrier(4, timeout=10)
    reasons = {}

    def handler(job):
        barrier.wait()
        job.cancellation.wait(20)
        reasons[job.id] = job.cancellation.reason
        raise errors.UnrecoverableError("stopped")

    added = [queue.add("x", {"i": i}) for i in range(3)]
    with Worker(qname, handler, connection=redis_url, concurrency=3) as worker:
        barrier.wait()
        assert sorted(worker.cancel_all_jobs("maintenance")) == sorted(j.id for j in added)
        wait_until(lambda: queue.get_job_counts("failed")["failed"] == 3, 10)
    assert reasons == {j.id: "maintenance" for j in added}


def test_cancellations_racing_the_jobs_end_leave_every_job_finished(queue, redis_url, qname):
    n = 200

    def handler(job):
        time.sleep(random.random() * 0.004)
        job.cancellation.raise_if_set()
        return job.id

    queue.add_bulk([{"name": "x", "data": {}} for _ in range(n)])
    stop = threading.Event()
    worker = Worker(qname, handler, connection=redis_url, concurrency=8).start()

    def canceller():
        while not stop.is_set():
            worker.cancel_all_jobs("race")
            time.sleep(0.001)

    thread = threading.Thread(target=canceller)
    thread.start()
    try:
        wait_until(lambda: sum(queue.get_job_counts("completed", "failed").values()) == n, 60)
    finally:
        stop.set()
        thread.join(5)
        assert worker.close(timeout=10)
    failed = queue.get_jobs(["failed"], 0, -1)
    assert all(job.failed_reason == "race" for job in failed)
    assert queue.get_job_counts("active", "waiting") == {"active": 0, "waiting": 0, "paused": 0}


def test_arguments_and_process_mode_are_checked(redis_url, qname):
    worker = Worker(qname, lambda job: 1, connection=redis_url)
    with pytest.raises(errors.InvalidArgumentType, match="job_id"):
        worker.cancel_job(None)
    with pytest.raises(errors.InvalidArgumentType, match="reason"):
        worker.cancel_job("1", reason=5)
    with pytest.raises(errors.InvalidArgumentType, match="reason"):
        worker.cancel_all_jobs(reason=["x"])
    in_children = Worker(qname, "json:dumps", connection=redis_url, processes=1)
    for call in (lambda: in_children.cancel_job("1"), in_children.cancel_all_jobs):
        with pytest.raises(errors.InvalidStateError, match="child processes"):
            call()


def test_the_cancellation_object():
    cancel = Cancellation()
    assert not cancel.is_set() and cancel.reason is None and cancel.wait(0.01) is False
    cancel.raise_if_set()                         # nothing yet
    waiter = threading.Thread(target=cancel.wait, args=(10,))
    waiter.start()
    cancel.set("first")
    cancel.set("second")                          # the first reason stays
    waiter.join(2)
    assert not waiter.is_alive() and cancel.is_set() and cancel.reason == "first"
    with pytest.raises(errors.JobCancelled, match="first") as info:
        cancel.raise_if_set()
    assert info.value.reason == "first"
    assert str(errors.JobCancelled()) == "the job was cancelled"
