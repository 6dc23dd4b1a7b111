"""Manual processing with a real Node BullMQ on one Redis, both ways: Node adds and Python
takes with get_next_job(token) and moves the job itself; Python adds and Node's Worker
without a processor takes (getNextJob) and moves (moveToCompleted / moveToFailed); a lock
taken with a token on one side is moved with it on the other. Both sides then read the
same final state. Node commands: tests/interop/node/manual_commands.js.

Timeouts are failure guards only."""
from __future__ import annotations

import time

import pytest

from orijs_sync import Worker, errors
from orijs_sync.testing import wait_until

GUARD = 30.0


def _same_final_state(node, queue, job_id, state):
    """Node's getJob and Python's get_job agree on the job's final state; Node's fields."""
    seen = node("getJob", queue=queue.name, id=job_id)
    job = queue.get_job(job_id)
    assert seen["state"] == queue.get_job_state(job_id) == state
    assert seen["returnvalue"] == job.returnvalue
    assert seen["failedReason"] == job.failed_reason
    assert seen["attemptsMade"] == job.attempts_made
    assert seen["attemptsStarted"] == job.attempts_started
    assert seen["finishedOn"] == job.finished_on
    return seen


@pytest.fixture
def manual(redis_url, qname):
    worker = Worker(qname, None, connection=redis_url, drain_delay=1)
    yield worker
    worker.close()


def test_node_adds_python_takes_and_completes_by_hand(node, manual, queue, r):
    first = node("add", queue=queue.name, name="a", data={"n": 1})["id"]
    second = node("add", queue=queue.name, name="b", data={"n": 2})["id"]
    job = manual.get_next_job("py-token", timeout=GUARD)
    assert (job.id, job.data, job.token) == (first, {"n": 1}, "py-token")
    assert r.get(queue.keys.lock(first)) == "py-token"
    nxt = job.move_to_completed({"py": 1}, "py-token", fetch_next=True)
    assert nxt.id == second and r.get(queue.keys.lock(second)) == "py-token"
    nxt.move_to_completed({"py": 2}, "py-token")
    seen = _same_final_state(node, queue, first, "completed")
    assert seen["returnvalue"] == {"py": 1} and seen["attemptsMade"] == 1
    assert _same_final_state(node, queue, second, "completed")["returnvalue"] == {"py": 2}


def test_python_fails_by_hand_with_retries_node_reads_each_step(node, manual, queue):
    job_id = node("add", queue=queue.name, name="x", data={},
                  opts={"attempts": 2, "backoff": {"type": "fixed", "delay": 100}})["id"]
    job = manual.get_next_job("t", timeout=GUARD)
    job.move_to_failed(ValueError("first try"), "t")
    seen = node("getJob", queue=queue.name, id=job_id)
    assert seen["state"] == "delayed" and seen["attemptsMade"] == 1
    assert seen["failedReason"] == "first try" and "ValueError: first try" in seen["stacktrace"][0]
    job = manual.get_next_job("t", timeout=GUARD)
    job.move_to_failed(ValueError("second try"), "t")
    seen = _same_final_state(node, queue, job_id, "failed")
    assert seen["failedReason"] == "second try" and seen["attemptsMade"] == 2


def test_python_adds_node_takes_and_completes_by_hand(node, queue):
    ids = [queue.add("x", {"i": i}).id for i in range(3)]
    done = node("manualProcess", queue=queue.name, count=3, token="node-token", fetchNext=True)
    assert [d["id"] for d in done] == ids
    assert all(d["lock"] == "node-token" and d["token"] == "node-token" for d in done)
    assert [d["next"] for d in done] == ids[1:] + [None]       # fetchNext took the next one
    for i, job_id in enumerate(ids):
        seen = _same_final_state(node, queue, job_id, "completed")
        assert seen["returnvalue"] == {"echo": {"i": i}} and seen["attemptsStarted"] == 1


def test_python_adds_node_fails_by_hand_and_python_retries_it(node, manual, queue):
    added = queue.add("x", {}, attempts=2)
    node("manualProcess", queue=queue.name, count=1, fail="node says no")
    assert queue.get_job_state(added.id) == "waiting"           # retried: attempts left
    assert queue.get_job(added.id).attempts_made == 1
    job = manual.get_next_job("t", timeout=GUARD)
    assert job.id == added.id and job.failed_reason == "node says no"
    job.move_to_completed("fixed by python", "t")
    seen = _same_final_state(node, queue, added.id, "completed")
    assert seen["attemptsMade"] == 2 and seen["attemptsStarted"] == 2


def test_a_lock_taken_by_python_is_moved_by_node_with_its_token(node, manual, queue):
    added = queue.add("x", {})
    job = manual.get_next_job("shared-token")
    with pytest.raises(AssertionError, match="Lock mismatch for job"):   # NodeDriverError
        node("moveWithToken", queue=queue.name, id=job.id, token="not-the-token")
    assert queue.get_job_state(job.id) == "active"
    extended = node("extendLock", queue=queue.name, id=job.id, token="shared-token",
                    duration=60_000)
    assert extended["extended"] == 1 and extended["pttl"] > 50_000
    node("moveWithToken", queue=queue.name, id=job.id, token="shared-token")
    assert _same_final_state(node, queue, added.id, "completed")["returnvalue"] == {"by": "node"}
    with pytest.raises(errors.LockLost):        # Python's hold is gone with it
        job.move_to_completed(1, "shared-token")


def test_a_job_node_took_by_hand_and_left_stalls_back_to_python(node, queue, redis_url, qname):
    added = queue.add("x", {})
    taken = node("manualTake", queue=queue.name, token="node-crashed",
                 workerOpts={"lockDuration": 300})
    assert taken["id"] == added.id and taken["lock"] == "node-crashed" and taken["pttl"] <= 300
    stalled = []
    with Worker(qname, None, connection=redis_url, stalled_interval=0.2) as manual:
        manual.on("stalled", stalled.append)
        manual.start_stalled_check_timer()
        job = None
        deadline = time.monotonic() + GUARD
        while job is None and time.monotonic() < deadline:
            job = manual.get_next_job("py", timeout=1)
        assert job is not None and job.id == added.id
        job.move_to_completed("recovered", "py")
        wait_until(lambda: stalled == [added.id], GUARD)     # emitted as the check returned
    seen = _same_final_state(node, queue, added.id, "completed")
    assert seen["stalledCounter"] == 1 and seen["attemptsStarted"] == 2
