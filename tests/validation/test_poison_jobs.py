"""Poison jobs: job hashes corrupted by hand among normal jobs. Each bad one fails on its
own with a failedReason naming the field and never reaches the handler undecoded; every
normal job completes; the worker closes in time."""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Tuple

import pytest
import redis

from orijs_sync import Queue, QueueEvents, Worker, errors
from orijs_sync.testing import wait_until

NORMAL = 40

# name -> (fields to set, fields to delete, what the failedReason must say)
POISONS: Dict[str, Tuple[Dict[str, str], List[str], str]] = {
    "data": ({"data": "{not json"}, [], "data is not JSON"),
    "opts": ({"opts": "not json"}, [], "opts is not JSON"),
    "opts-array": ({"opts": "[1, 2]"}, [], "opts is not a JSON object"),
    "attempts-text": ({"opts": '{"attempts": "three"}'}, [], "opts.attempts is not an integer"),
    "attempts-list": ({"opts": '{"attempts": [3]}'}, [], "opts.attempts is not an integer"),
    "remove-on-fail": ({"opts": '{"removeOnFail": "yes"}'}, [], "opts.removeOnFail"),
    "backoff": ({"opts": '{"attempts": 3, "backoff": {"type": 5}}'}, [], "opts.backoff"),
    "missing": ({}, ["name", "data", "opts", "timestamp"], "has no name, data, opts, timestamp"),
    "stacktrace": ({"stacktrace": "Error: boom\n  at x"}, [], "stacktrace is not JSON"),
    "parent": ({"parent": "{oops", "parentKey": "bull:nowhere:1"}, [], "parent is not JSON"),
    "timestamp": ({"timestamp": "inf"}, [], "timestamp"),
    # numbers a script would pass on as something Redis refuses (1e+300, 1.5 as a count)
    "keep-count-decimal": ({"opts": '{"removeOnComplete": {"count": 1.5}}'}, [],
                           "opts.removeOnComplete"),
    "keep-huge": ({"opts": '{"removeOnFail": 1e300}'}, [], "opts.removeOnFail"),
    "keep-limit-huge": ({"opts": '{"removeOnComplete": {"age": 1, "limit": 1e300}}'}, [],
                        "opts.removeOnComplete"),
    "stack-limit-huge": ({"opts": '{"stackTraceLimit": 1e20}'}, [], "opts.stackTraceLimit"),
    "backoff-huge": ({"opts": '{"attempts": 3, "backoff": {"type": "exponential", '
                              '"delay": 1e308}}'}, [], "opts.backoff"),
}


def add_poisons(queue: Queue, r: redis.Redis) -> Dict[str, str]:
    """One corrupted job per kind (added normally, then edited), plus an id in wait
    whose hash does not exist at all. Returns job id -> what its reason must say."""
    expected = {}
    for kind, (fields, deleted, reason) in POISONS.items():
        job = queue.add(f"poison-{kind}", {"fail": kind == "stacktrace"})
        if fields:
            r.hset(queue.keys.job(job.id), mapping=fields)
        if deleted:
            r.hdel(queue.keys.job(job.id), *deleted)
        expected[job.id] = reason
    r.lpush(queue.keys.wait, "ghost")
    expected["ghost"] = "has no name, data, opts, timestamp"
    return expected


@pytest.mark.parametrize("concurrency", [1, 8])
def test_poison_jobs_fail_alone_and_normal_jobs_complete(queue: Queue, r: redis.Redis,
                                                         redis_url: str, qname: str,
                                                         concurrency: int) -> None:
    normal = [queue.add("ok", {"i": i}).id for i in range(NORMAL // 2)]
    expected = add_poisons(queue, r)
    normal += [queue.add("ok", {"i": i}).id for i in range(NORMAL // 2, NORMAL)]
    seen: List[Any] = []
    failed: Dict[str, str] = {}
    lock = threading.Lock()

    def handler(job: Any) -> Any:
        with lock:
            seen.append(job.data)
        if job.data.get("fail"):
            raise RuntimeError("handler failed")
        return job.data["i"] * 2

    worker = Worker(qname, handler, connection=redis_url, concurrency=concurrency)
    worker.on("failed", lambda job, exc: failed.__setitem__(job.id, job.failed_reason))
    worker.start()
    try:
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == NORMAL
                   and queue.get_job_counts("failed")["failed"] == len(expected),
                   timeout=30, what="every job finished")
    finally:
        closed = worker.close(timeout=5)
    assert closed is True
    assert all(isinstance(data, dict) and "i" in data for data in seen), seen
    for job_id in normal:
        assert queue.get_job(job_id).returnvalue is not None
    for job_id, reason in expected.items():
        stored = queue.get_job(job_id)
        assert stored is not None and reason in (stored.failed_reason or ""), (job_id, stored)
        assert reason in failed.get(job_id, ""), (job_id, failed.get(job_id))
    assert queue.get_job_counts("active", "waiting") == {"active": 0, "waiting": 0, "paused": 0}


def test_get_job_shows_what_is_wrong(queue: Queue, r: redis.Redis) -> None:
    expected = add_poisons(queue, r)
    del expected["ghost"]                     # no hash: get_job() gives None
    for job_id, reason in expected.items():
        job = queue.get_job(job_id)
        assert job is not None and job.problem is not None and reason in job.problem, (
            job_id, job.problem if job else None)
    assert queue.get_job("ghost") is None
    assert queue.add("fine", {"a": 1}).problem is None
    assert queue.get_job(queue.add("fine", {"a": 1}).id).problem is None


def test_an_outcome_redis_refuses_does_not_hold_back_its_batch(queue: Queue, redis_url: str,
                                                               qname: str) -> None:
    """A job whose outcome the finishing script refuses is dropped (left to the stalled
    checker); the other outcomes of its batch are written."""
    release = threading.Event()
    errors_seen: List[BaseException] = []

    def handler(job: Any) -> Any:
        release.wait(10)        # let outcomes pile up into one batch
        if job.name == "bad":   # a keepJobs age that cannot be sent (not JSON)
            job.opts["removeOnComplete"] = {"age": float("nan")}
        return job.data

    ids = [queue.add("ok", {"i": i}).id for i in range(6)]
    bad = queue.add("bad", {"i": -1}).id
    ids += [queue.add("ok", {"i": i}).id for i in range(6, 12)]
    worker = Worker(qname, handler, connection=redis_url, concurrency=8)
    worker.on("error", errors_seen.append)
    worker.start()
    try:
        wait_until(lambda: queue.get_job_counts("active")["active"] == 8, timeout=10)
        release.set()
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == len(ids),
                   timeout=30, what="every good job completed")
    finally:
        release.set()
        closed = worker.close(timeout=5)
    assert closed is True
    assert queue.get_job_state(bad) == "active"     # until its lock expires and it stalls
    assert any(isinstance(e, errors.CorruptJob) and bad in str(e) for e in errors_seen)


def test_a_stored_keep_count_written_as_a_float_is_honoured(queue: Queue, r: redis.Redis,
                                                           redis_url: str) -> None:
    """``removeOnComplete: 2.0`` (as JSON a Python program writes it) passes the stored-
    opts check, so it must also be written: the last two jobs are kept, none stalls."""
    jobs = [queue.add("x", {"i": i}) for i in range(4)]
    for job in jobs:
        r.hset(queue.keys.job(job.id), "opts", '{"attempts": 1, "removeOnComplete": 2.0}')
    with Worker(queue.name, lambda job: job.data["i"], connection=redis_url):
        wait_until(lambda: queue.get_job_counts("active", "waiting") == {
            "active": 0, "waiting": 0, "paused": 0},
                   timeout=10, what="every job written")
    assert sorted(r.zrange(queue.keys.completed, 0, -1)) == sorted(j.id for j in jobs[2:])


def test_corrupted_counters_and_priorities_hold_up_nothing(queue: Queue, r: redis.Redis,
                                                          redis_url: str) -> None:
    """A counter that is not an integer (HINCRBY refuses it) and a priority that is no
    finite number (no score) are another program's writes a take, a finish or a
    promotion of delayed jobs meets: each used to fail its whole call, so the job at
    the head of wait (or a due delayed job) held up every job of the queue."""
    first = queue.add("x", {"i": 0}, attempts=2).id
    r.hset(queue.keys.job(first), mapping={"ats": "abc", "atm": "1e400"})
    delayed = queue.add("x", {"i": 1}, delay=0.05).id
    r.hset(queue.keys.job(delayed), "priority", "nan")
    rest = [queue.add("x", {"i": i}).id for i in range(2, 12)]
    with Worker(queue.name, lambda job: job.data["i"], connection=redis_url, concurrency=4):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 12, timeout=10,
                   what="every job completed")
    assert [queue.get_job(j).returnvalue for j in [first, delayed, *rest]] == list(range(12))
    assert r.hmget(queue.keys.job(first), "ats", "atm") == ["1", "1"]    # restarted at 0


def test_a_corrupted_stalled_counter_does_not_stop_stall_recovery(queue: Queue, r: redis.Redis,
                                                                  redis_url: str) -> None:
    """A job left active without a lock (its worker died) whose stalled counter is not an
    integer: the stalled check moves it back to wait and it runs."""
    job_id = queue.add("x", {"i": 7}).id
    r.lrem(queue.keys.wait, 1, job_id)
    r.lpush(queue.keys.active, job_id)
    r.hset(queue.keys.job(job_id), "stc", "abc")
    with Worker(queue.name, lambda job: job.data["i"], connection=redis_url,
                stalled_interval=0.1):
        wait_until(lambda: queue.get_job_state(job_id) == "completed", timeout=10,
                   what="the stalled job recovered and completed")
    assert r.hget(queue.keys.job(job_id), "stc") == "1"


@pytest.mark.parametrize("field,value", [("opts.maxLenEvents", ""), ("opts.maxLenEvents", "1.5"),
                                         ("concurrency", "abc"), ("max", "5"),
                                         ("max", "nan")])
def test_a_corrupted_queue_setting_stops_neither_adds_nor_workers(queue: Queue, r: redis.Redis,
                                                                  redis_url: str, field: str,
                                                                  value: str) -> None:
    """A field of the queue's meta hash another program wrote that is no number (the
    events stream's length, the global concurrency, a rate limit without its window)
    made every add, take or finish of the queue fail. It now counts as unset."""
    queue.add("x", {"i": 0})                   # the meta hash exists
    r.hset(queue.keys.meta, field, value)
    ids = [queue.add("x", {"i": i}).id for i in range(1, 6)]
    with Worker(queue.name, lambda job: job.data["i"], connection=redis_url, concurrency=2):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 6, timeout=10,
                   what="every job completed")
    assert [queue.get_job(j).returnvalue for j in ids] == [1, 2, 3, 4, 5]
    assert r.hget(queue.keys.meta, field) == value        # another program's data: kept


def test_bytes_that_are_not_utf8_fail_only_their_job_and_are_kept(queue: Queue, redis_url: str,
                                                                   qname: str) -> None:
    """Another program wrote bytes that are not UTF-8: into a job's data, its name, its
    very id, an event. Replies carrying them raised while being decoded, so a take
    failed with every job it had moved to active, and ``get_job`` raised. Now the data
    fails its job as not JSON, a name or id is used as it is, and every byte is kept."""
    raw = redis.Redis.from_url(redis_url)                 # bytes in, bytes out
    bad_data = queue.add("x", {"i": 0}).id
    raw.hset(queue.keys.job(bad_data), "data", b"\xff\xfe{}")
    bad_name = queue.add("x", {"i": 1}).id
    raw.hset(queue.keys.job(bad_name), "name", b"caf\xe9")
    moved = queue.add("x", {"i": 2}).id                  # the same job under an id not UTF-8
    raw.rename(queue.keys.job(moved), queue.keys.job("").encode() + b"\xffid")
    raw.lrem(queue.keys.wait, 1, moved)
    raw.lpush(queue.keys.wait, b"\xffid")
    normal = [queue.add("x", {"i": i}).id for i in range(3, 8)]
    with QueueEvents(qname, connection=redis_url) as events, \
            Worker(qname, lambda job: job.data["i"], connection=redis_url, concurrency=4):
        raw.xadd(queue.keys.events, {b"event": b"completed", b"jobId": b"\xff",
                                     b"returnvalue": b"\xfe"})
        assert queue.add("x", {"i": 8}).wait_until_finished(events, timeout=10) == 8
        wait_until(lambda: queue.get_job_counts("completed", "failed")
                   == {"completed": 8, "failed": 1}, timeout=10, what="every job ended")
    assert "data is not JSON" in (queue.get_job(bad_data).failed_reason or "")
    assert raw.hget(queue.keys.job(bad_name), "name") == b"caf\xe9"
    assert raw.hget(queue.keys.job("").encode() + b"\xffid", "returnvalue") == b"2"
    assert b"\xffid" in raw.zrange(queue.keys.completed, 0, -1)
    assert [queue.get_job(j).returnvalue for j in normal] == [3, 4, 5, 6, 7]


def test_every_argument_a_client_takes_is_packed_as_redis_py_packs_it(queue: Queue) -> None:
    """The library's clients pack commands with hiredis directly (redis-py's packer
    first splits a command name holding a space and copies the arguments): what that
    skips must still work as redis-py does it, and what redis-py refuses is refused."""
    client, key = queue.client, queue.keys.key("packed")
    client.set(key, bytearray(b"from a bytearray"))
    assert client.get(key) == "from a bytearray"
    client.set(key, memoryview(b"from a memoryview"))
    assert client.get(key) == "from a memoryview"
    client.hset(key + ":h", mapping={"int": 7, "float": 1.5, "bytes": b"\xff"})
    assert client.hgetall(key + ":h") == {"int": "7", "float": "1.5",
                                          "bytes": "\udcff"}   # written back as 0xff
    assert client.execute_command("CLIENT SETNAME", "orijs-packed") is True
    assert client.execute_command("CLIENT GETNAME") == "orijs-packed"
    for refused in (None, True, [1]):
        with pytest.raises(errors.RedisError, match="must be str, int, float or bytes"):
            client.set(key, refused)
    assert client.get(key) == "from a memoryview"
