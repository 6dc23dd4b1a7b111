"""close() and pause() called from a Worker's own listeners (or handlers): they must not
wait for the job whose listener (or handler) the calling thread runs, yet still wait
for the worker's other jobs and join every other thread."""
from __future__ import annotations

import threading
from typing import Any, List

import pytest

from orijs_sync import Worker, WorkerGroup
from orijs_sync.testing import orijs_threads, wait_until

GUARD = 30.0


def threads_of(label: str) -> List[threading.Thread]:
    return [t for t in orijs_threads() if t.name.endswith(label)]


def slow_and_quick(queue: Any, other_job: bool):
    """Jobs for a worker of concurrency 2: with ``other_job``, a "slow" one that runs
    until released, then a "quick" one that returns once the slow one runs (its outcome
    then goes to the finisher thread); else the quick one alone (its outcome is written
    by its handler thread). The handler, the jobs, the release event."""
    slow_running, release = threading.Event(), threading.Event()

    def handler(job):
        if job.name == "slow":
            slow_running.set()
            release.wait(GUARD)
            return "slow"
        if other_job:
            slow_running.wait(GUARD)
        return "quick"

    jobs = [queue.add("slow", {})] if other_job else []
    jobs.append(queue.add("quick", {}))
    return handler, jobs, release


@pytest.mark.parametrize("other_job", [False, True],
                         ids=["written-by-its-handler-thread", "written-by-the-finisher"])
def test_close_from_a_completed_listener_waits_for_the_other_jobs_only(queue, redis_url, qname,
                                                                       other_job):
    handler, jobs, release = slow_and_quick(queue, other_job)
    returned = []
    worker = Worker(qname, handler, connection=redis_url, concurrency=2, drain_delay=0.5)

    def on_completed(job, result):
        if job.name == "quick":
            release.set()
            closed = worker.close()             # no timeout: a wait for its own job hangs
            returned.append((closed, [queue.get_job_state(j.id) for j in jobs]))

    worker.on("completed", on_completed)
    try:
        worker.start()
        wait_until(lambda: returned, GUARD, what="close() from the listener to return")
        assert returned == [(True, ["completed"] * len(jobs))]
        assert worker._state == "closed"
        wait_until(lambda: not threads_of(qname), GUARD, what="the listener's thread to end")
    finally:
        release.set()
        worker.close(timeout=5)


def test_pause_from_a_listener_waits_for_the_other_jobs_only(queue, redis_url, qname):
    handler, jobs, release = slow_and_quick(queue, True)
    returned = []
    worker = Worker(qname, handler, connection=redis_url, concurrency=2, drain_delay=0.5)

    def on_completed(job, result):
        if job.name == "quick":
            release.set()
            worker.pause()                       # no timeout
            returned.append([queue.get_job_state(j.id) for j in jobs])

    worker.on("completed", on_completed)
    try:
        worker.start()
        wait_until(lambda: returned, GUARD, what="pause() from the listener to return")
        assert returned == [["completed", "completed"]] and worker.is_paused
        later = queue.add("later", {})
        worker.resume()
        wait_until(lambda: queue.get_job_state(later.id) == "completed", GUARD)
    finally:
        release.set()
        assert worker.close(timeout=GUARD) is True


def test_pause_from_a_handler_does_not_wait_for_its_own_job(queue, redis_url, qname):
    returned = []

    def handler(job):
        worker.pause()                           # no timeout
        returned.append(worker.is_paused)
        return "paused"

    worker = Worker(qname, handler, connection=redis_url, drain_delay=0.5)
    job = queue.add("x", {})
    try:
        worker.start()
        wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD,
                   what="the job whose handler paused its worker to complete")
        assert returned == [True]
    finally:
        assert worker.close(timeout=GUARD) is True


def test_group_close_from_a_listener_closes_every_worker_and_joins_the_threads(redis_url, qname,
                                                                               namespace):
    from orijs_sync import Queue
    other_name = f"{qname}-other"
    release = threading.Event()
    group_name = f"g-{namespace}"
    group = WorkerGroup(redis_url, name=group_name)
    returned = []

    def on_completed(job, result):
        release.set()
        returned.append(group.close())          # no timeout

    with Queue(qname, connection=redis_url) as queue, \
            Queue(other_name, connection=redis_url) as other_queue:
        slow = other_queue.add("slow", {})
        slow_worker = Worker(other_name, lambda j: release.wait(GUARD), group=group)
        quick_worker = Worker(qname, lambda j: "quick", group=group)
        quick_worker.on("completed", on_completed)
        try:
            slow_worker.start()
            wait_until(lambda: other_queue.get_job_state(slow.id) == "active", GUARD)
            quick = queue.add("quick", {})
            quick_worker.start()
            wait_until(lambda: returned, GUARD, what="WorkerGroup.close() from a listener")
            assert returned == [True]
            assert other_queue.get_job_state(slow.id) == "completed"
            assert queue.get_job_state(quick.id) == "completed"
            assert not slow_worker.is_running and not quick_worker.is_running
            wait_until(lambda: not threads_of(group_name), GUARD,
                       what="the listener's thread to end")
        finally:
            release.set()
            group.close(timeout=5)


def test_a_job_the_closing_listeners_write_took_is_left_for_stall_recovery(queue, redis_url,
                                                                          qname):
    """The write whose listener closes the worker took the next job (it was allowed to
    when it was sent): a closed worker does not run it; it stays active, and another
    worker's stalled checker takes it once its lock expires."""
    ran, returned = [], []
    worker = Worker(qname, lambda job: ran.append(job.name) or job.name, connection=redis_url,
                    lock_duration=1, drain_delay=0.5, skip_stalled_check=True)

    def on_completed(job, result):
        if job.name == "first":
            returned.append(worker.close())

    worker.on("completed", on_completed)
    queue.add("first", {})
    second = queue.add("second", {})
    try:
        worker.start()
        wait_until(lambda: returned, GUARD, what="close() from the listener to return")
        assert returned == [True]
        wait_until(lambda: not threads_of(qname), GUARD, what="the listener's thread to end")
        assert ran == ["first"] and queue.get_job_state(second.id) == "active"
        with Worker(qname, lambda job: "recovered", connection=redis_url, stalled_interval=0.3,
                    drain_delay=0.5):
            wait_until(lambda: queue.get_job_state(second.id) == "completed", GUARD)
        assert queue.get_job(second.id).returnvalue == "recovered" and ran == ["first"]
    finally:
        worker.close(timeout=5)
