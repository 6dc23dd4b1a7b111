"""Queue control and getters."""
from __future__ import annotations

import threading
import time

import pytest

from orijs_sync import Worker, errors
from orijs_sync.testing import wait_until


def test_pause_stops_every_worker_and_resume_restarts(queue, redis_url, qname, r):
    done = []
    queue.pause()
    assert queue.is_paused()
    job = queue.add("x", {})
    assert r.lrange(queue.keys.paused, 0, -1) == [job.id]
    assert queue.get_job_counts("paused", "waiting") == {"paused": 1, "waiting": 0}
    with Worker(qname, lambda j: done.append(j.id), connection=redis_url):
        time.sleep(0.4)
        assert done == []
        queue.resume()
        wait_until(lambda: done == [job.id])
    events = [f["event"] for _, f in r.xrange(queue.keys.events)]
    assert "paused" in events and "resumed" in events


def test_drain_removes_waiting_and_optionally_delayed(queue, r):
    queue.add("a", {})
    queue.add("b", {}, priority=3)
    delayed = queue.add("c", {}, delay=60)
    assert queue.drain() == 2
    assert queue.get_job_counts("waiting", "prioritized", "delayed") == \
        {"waiting": 0, "prioritized": 0, "delayed": 1, "paused": 0}
    assert queue.drain(delayed=True) == 1
    assert not r.exists(queue.keys.job(delayed.id))


def test_clean_removes_old_finished_jobs_up_to_a_limit(queue, redis_url, qname):
    queue.add_bulk([{"name": "x", "data": {}} for _ in range(5)])
    with Worker(qname, lambda j: None, connection=redis_url):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 5)
    assert queue.clean(60, 0, "completed") == []          # none older than a minute
    time.sleep(0.05)
    removed = queue.clean(0, 3, "completed")
    assert len(removed) == 3
    assert queue.get_job_counts("completed")["completed"] == 2
    assert all(queue.get_job(i) is None for i in removed)
    with pytest.raises(ValueError, match="unknown job state"):
        queue.clean(0, 0, "finished")


def test_obliterate_refuses_active_jobs_unless_forced(queue, redis_url, qname, r):
    release = threading.Event()
    queue.add_bulk([{"name": "x", "data": {}} for _ in range(3)])
    job = queue.add("x", {}, delay=30)
    worker = Worker(qname, lambda j: release.wait(10), connection=redis_url).start()
    try:
        wait_until(lambda: queue.get_job_counts("active")["active"] == 1)
        with pytest.raises(errors.InvalidStateError, match="active"):
            queue.obliterate()
        assert r.exists(queue.keys.job(job.id))
        queue.obliterate(force=True)
        assert list(r.scan_iter(match=f"bull:{qname}:*")) == []
    finally:
        release.set()
        worker.close()


def test_remove_leaves_locked_jobs_alone(queue, redis_url, qname, r):
    waiting = queue.add("x", {}, delay=30)
    assert queue.remove(waiting.id) is True
    assert queue.get_job(waiting.id) is None and r.zcard(queue.keys.delayed) == 0
    release = threading.Event()
    busy = queue.add("x", {})
    with Worker(qname, lambda j: release.wait(10), connection=redis_url):
        wait_until(lambda: queue.get_job_state(busy.id) == "active")
        assert queue.remove(busy.id) is False
        release.set()
    assert queue.get_job(busy.id) is not None


def test_retry_a_failed_job(queue, redis_url, qname):
    fail = {"on": True}

    def handler(job):
        if fail["on"]:
            raise RuntimeError("down")
        return "up"

    job = queue.add("x", {})
    with Worker(qname, handler, connection=redis_url):
        wait_until(lambda: queue.get_job_state(job.id) == "failed")
        fail["on"] = False
        queue.get_job(job.id).retry()
        wait_until(lambda: queue.get_job_state(job.id) == "completed")
    final = queue.get_job(job.id)
    assert final.returnvalue == "up" and final.failed_reason is None
    with pytest.raises(errors.InvalidStateError):
        final.retry()  # it is not failed any more


def test_promote_change_delay_and_change_priority(queue, r):
    job = queue.add("x", {}, delay=60)
    job.change_delay(120)
    assert int(r.zscore(queue.keys.delayed, job.id)) >> 12 >= job.timestamp + 120_000
    job.promote()
    assert job.get_state() == "waiting" and queue.get_job(job.id).delay == 0
    with pytest.raises(errors.InvalidStateError):
        job.promote()
    job.change_priority(7)
    assert job.get_state() == "prioritized"
    assert queue.get_job(job.id).priority == 7
    job.change_priority(0)
    assert job.get_state() == "waiting"
    with pytest.raises(ValueError, match="priority"):
        job.change_priority(-3)


def test_getters(queue, redis_url, qname):
    ids = [queue.add("x", {"i": i}).id for i in range(4)]
    delayed = queue.add("x", {}, delay=60)
    assert [j.id for j in queue.get_waiting()] == ids
    assert [j.id for j in queue.get_jobs(["waiting"], 0, 1, asc=True)] == ids[:2]
    assert [j.id for j in queue.get_jobs("wait", asc=False)] == list(reversed(ids))
    assert [j.id for j in queue.get_delayed()] == [delayed.id]
    assert queue.count() == 5
    with Worker(qname, lambda j: j.data["i"], connection=redis_url):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 4)
    completed = queue.get_completed()
    assert {j.id for j in completed} == set(ids)
    assert completed[0].finished_on >= completed[-1].finished_on  # newest first
    assert queue.get_failed() == [] and queue.get_active() == []
    assert queue.get_job_state("nope") == "unknown"


def test_remove_only_in_given_states(queue, redis_url, qname):
    delayed = queue.add("x", {}, delay=60)
    assert queue.remove(delayed.id, states=["waiting"]) is False
    assert queue.remove(delayed.id, states=["waiting", "delayed"]) is True
    done = queue.add("x", {})
    with Worker(qname, lambda j: None, connection=redis_url):
        wait_until(lambda: queue.get_job_state(done.id) == "completed")
    assert queue.remove(done.id, states=["waiting", "delayed", "prioritized"]) is False
    assert queue.get_job(done.id) is not None
    queue.pause()
    paused = queue.add("x", {})
    assert queue.remove(paused.id, states=["waiting"]) is True   # paused jobs are waiting
