"""Workers listed as BullMQ lists them (CLIENT SETNAME) and BullMQ's metrics keys,
against a real Redis (the Node side: tests/interop/test_interop_monitoring.py)."""
from __future__ import annotations

import base64
from typing import Iterator

import pytest
import redis

from orijs_sync import Job, Queue, Worker, errors
from orijs_sync.testing import wait_until


def handler(job: Job) -> str:
    if job.name.startswith("fail"):
        raise ValueError(f"no {job.name}")
    return "ok"


def raw_names(queue: Queue) -> "list[str]":
    return sorted(w["rawname"] for w in queue.get_workers())


def test_worker_connection_is_named_as_bullmq_names_it(queue, redis_url, qname):
    expected = "bull:" + base64.b64encode(qname.encode()).decode()
    assert queue.get_workers() == []
    with Worker(qname, handler, redis_url, drain_delay=1).start():
        with Worker(qname, handler, redis_url, worker_name="billing-1", drain_delay=1).start():
            wait_until(lambda: len(queue.get_workers()) == 2, what="two workers listed")
            assert raw_names(queue) == [expected, f"{expected}:w:billing-1"]
            assert {w["name"] for w in queue.get_workers()} == {qname}
            assert all("addr" in w and "age" in w for w in queue.get_workers())
            assert queue.get_workers_count() == 2
    wait_until(lambda: queue.get_workers() == [], what="closed workers gone from the list")


def test_a_unicode_queue_name_is_base64_of_its_utf8(redis_url, namespace):
    name = f"caf\u00e9-\u4e16-{namespace}"
    with Queue(name, redis_url, prefix="app") as queue, \
            Worker(name, handler, redis_url, prefix="app", drain_delay=1).start():
        wait_until(lambda: len(queue.get_workers()) == 1, what="worker listed")
        assert queue.get_workers()[0]["rawname"] == \
            "app:" + base64.b64encode(name.encode("utf-8")).decode()


def test_the_name_is_set_again_after_a_reconnect(queue, redis_url, qname, r):
    with Worker(qname, handler, redis_url, worker_name="w1", drain_delay=1).start():
        wait_until(lambda: len(queue.get_workers()) == 1, what="worker listed")
        old_id = queue.get_workers()[0]["id"]
        r.execute_command("CLIENT", "KILL", "ID", old_id)
        wait_until(lambda: [w["id"] for w in queue.get_workers()] not in ([], [old_id]),
                   timeout=30, what="worker listed again on a new connection")
        assert raw_names(queue)[0].endswith(":w:w1")
        job = queue.add("after-reconnect", {})
        wait_until(lambda: job.get_state() == "completed", timeout=30, what="job done")


@pytest.fixture
def user_without_setname(r, namespace) -> Iterator[str]:
    """An ACL user of the test server allowed everything but CLIENT SETNAME."""
    user = f"nosetname-{namespace}"
    r.execute_command("ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all",
                      "-client|setname")
    try:
        yield user
    finally:
        r.execute_command("ACL", "DELUSER", user)


def test_a_server_refusing_setname_leaves_the_worker_working_unlisted(
        queue, redis_url, qname, user_without_setname):
    options = redis.connection.parse_url(redis_url)
    options.update(username=user_without_setname, password="pw")
    worker = Worker(qname, handler, options, drain_delay=1)
    seen: "list[object]" = []
    worker.on("error", seen.append)
    worker.on("drained", lambda: seen.append("drained"))
    with worker.start():
        # drained: the fetcher then blocks on its (unnamed) blocking connection
        wait_until(lambda: "drained" in seen, timeout=30, what="worker idle")
        job = queue.add("still-works", {})
        wait_until(lambda: job.get_state() == "completed", timeout=30, what="job completed")
        assert queue.get_workers() == []
    assert seen[0] == "drained" and all(s == "drained" for s in seen), seen


def test_no_metrics_unless_asked(queue, redis_url, qname, r):
    queue.add("a", {})
    with Worker(qname, handler, redis_url, drain_delay=1).start():
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 1, what="done")
    assert r.keys(f"bull:{qname}:metrics*") == []
    assert queue.get_metrics("completed").meta.count == 0


def test_metrics_count_completed_and_failed_jobs(queue, redis_url, qname, r):
    queue.add_bulk([{"name": "ok"}, {"name": "ok"}, {"name": "ok"}, {"name": "fail-a"},
                    {"name": "fail-b"}])
    with Worker(qname, handler, redis_url, metrics={"max_data_points": 60},
                concurrency=2, drain_delay=1).start():
        wait_until(lambda: sum(queue.get_job_counts("completed", "failed").values()) == 5,
                   what="all five finished")
    completed, failed = queue.get_metrics("completed"), queue.get_metrics("failed")
    assert (completed.meta.count, failed.meta.count) == (3, 2)
    assert completed.meta.prev_ts > 0 and completed.meta.prev_count == 0
    # the first job of a minute starts the count; a point is written in a later minute
    assert completed.data == [] and completed.count == 0
    assert r.hgetall(f"bull:{qname}:metrics:failed")["count"] == "2"


def test_a_later_minute_writes_the_count_and_a_zero_per_empty_minute(queue, redis_url, qname, r):
    # the last point a year ago: the gap fills every kept point (max_data_points)
    r.hset(f"bull:{qname}:metrics:completed",
           mapping={"count": 9, "prevTS": 1000, "prevCount": 4})
    queue.add("ok", {})
    with Worker(qname, handler, redis_url, metrics={"max_data_points": 4}, drain_delay=1).start():
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 1, what="done")
    metrics = queue.get_metrics("completed")
    assert metrics.data == [0, 0, 0, 5] and metrics.count == 4
    assert (metrics.meta.count, metrics.meta.prev_count) == (10, 9)
    assert metrics.meta.prev_ts > 1000
    assert queue.get_metrics("completed", 0, 1).data == [0, 0]


@pytest.mark.parametrize("metrics", [{"max_data_points": 0}, {"max_points": 5}, {},
                                     {"max_data_points": "5"}, [("max_data_points", 5)]])
def test_bad_metrics_options_are_refused(redis_url, qname, metrics):
    with pytest.raises(errors.OrijsError):
        Worker(qname, handler, redis_url, metrics=metrics)


def test_get_metrics_checks_its_arguments(queue):
    with pytest.raises(errors.InvalidArgument):
        queue.get_metrics("waiting")
    with pytest.raises(errors.InvalidArgumentType):
        queue.get_metrics("failed", "0")
