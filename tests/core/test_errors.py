"""Every error a public call raises derives from errors.OrijsError, redis-py's original
kept as __cause__."""
from __future__ import annotations

import uuid

import pytest
import redis

from orijs_sync import Queue, QueueEvents, Worker, errors
from orijs_sync.testing import wait_until


def _wrapped(excinfo, original=redis.exceptions.ResponseError):
    assert isinstance(excinfo.value, errors.OrijsError)
    assert isinstance(excinfo.value.__cause__, original)


def test_an_error_reply_to_a_command_is_a_library_error(queue, r):
    r.set(queue.keys.job("7"), "not a hash")
    with pytest.raises(errors.RedisError, match="WRONGTYPE") as excinfo:
        queue.get_job("7")
    _wrapped(excinfo)


def test_an_error_reply_to_a_script_is_a_library_error(queue, r):
    r.set(queue.keys.wait, "not a list")
    with pytest.raises(errors.OrijsError, match="WRONGTYPE") as excinfo:
        queue.add("x", {})
    _wrapped(excinfo)


def test_an_error_reply_in_a_pipeline_is_a_library_error(queue, events, r):
    job = queue.add("x", {})
    r.delete(queue.keys.events)
    r.set(queue.keys.events, "not a stream")
    with pytest.raises(errors.OrijsError, match="WRONGTYPE") as excinfo:
        events.wait_for_job(queue, job.id, timeout=1)     # reads the job's run first
    _wrapped(excinfo)


def test_an_error_reply_on_the_workers_own_connection_reaches_error_listeners(
        queue, redis_url, qname, r):
    r.set(queue.keys.active, "not a list")
    seen = []
    worker = Worker(qname, lambda job: None, connection=redis_url, drain_delay=0.2)
    worker.on("error", seen.append)
    queue.add("x", {})
    with worker:
        wait_until(lambda: seen, 20)
    assert isinstance(seen[0], errors.RedisError)
    assert isinstance(seen[0].__cause__, redis.exceptions.ResponseError)
    r.delete(queue.keys.active)


def test_noperm_is_a_library_error(redis_url, qname, r):
    user, password = f"limited-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    r.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "+@all", "-hgetall",
                      "-evalsha", "-eval")
    try:
        url = redis_url.replace("redis://", f"redis://{user}:{password}@")
        with Queue(qname, connection=url) as limited:
            with pytest.raises(errors.OrijsError, match="no permissions") as excinfo:
                limited.add("x", {})
            assert isinstance(excinfo.value.__cause__, redis.exceptions.RedisError)
    finally:
        r.execute_command("ACL", "DELUSER", user)


def test_scripts_still_load_again_after_a_script_flush(queue, redis_url, qname, r):
    assert queue.add("x", {}).id == "1"
    r.script_flush()
    assert queue.add("x", {}).id == "2"            # NOSCRIPT: loaded and run again
    with Worker(qname, lambda job: job.id, connection=redis_url) as worker:
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 2, 20)
        r.script_flush()
        third = queue.add("x", {})
        wait_until(lambda: queue.get_job_state(third.id) == "completed", 20)
        assert worker.is_running
