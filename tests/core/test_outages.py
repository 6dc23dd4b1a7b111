"""Redis outages shorter than half the lock (Redis stopped, then restarted with its AOF):
no job runs in two workers at once, no finished result is dropped, work resumes at once,
and workers started before Redis wait for it."""
from __future__ import annotations

import threading
import time
from typing import Iterator, List

import pytest
import redis

from orijs_sync import Queue, Worker, errors
from orijs_sync.testing import RedisServer, wait_until


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    """A Redis of this test alone, with an AOF, that the test may stop and restart."""
    with RedisServer(appendonly=True) as server:
        yield server


def lock_renewals(r: redis.Redis, lock_key: str, count: int) -> List[float]:
    """The times (monotonic) of the next ``count`` renewals of a lock: its PTTL going up."""
    times: List[float] = []
    last = r.pttl(lock_key)
    deadline = time.monotonic() + 60
    while len(times) < count:
        assert time.monotonic() < deadline, "the lock was not renewed"
        ttl = r.pttl(lock_key)
        if ttl > last + 50:
            times.append(time.monotonic())
        last = ttl
        time.sleep(0.005)
    return times


def outage(server: RedisServer, r: redis.Redis, lock_key: str, timing: str,
           seconds: float) -> None:
    """Stop Redis for ``seconds``, right after a renewal of the lock, or just before the
    next one is due (the outage then swallows it: the worst case for the lock)."""
    first, second = lock_renewals(r, lock_key, 2)
    if timing == "just before the next renewal":
        time.sleep(max(second + (second - first) - 0.2 - time.monotonic(), 0))
    server.halt()
    time.sleep(seconds)
    server.restart()


def completed_events(r: redis.Redis, queue: Queue, job_id: str) -> int:
    return sum(1 for _, f in r.xrange(queue.keys.events)
               if f.get("event") == "completed" and f.get("jobId") == job_id)


@pytest.mark.parametrize("timing", ["right after a renewal", "just before the next renewal"])
def test_an_outage_shorter_than_half_the_lock_never_runs_a_job_twice(aof_redis, timing):
    url = aof_redis.url
    r = redis.Redis.from_url(url, decode_responses=True)
    queue = Queue("outage", connection=url)
    runs: List[str] = []

    def handler(name):
        def run(job):
            runs.append(name)
            time.sleep(15)
            return name
        return run

    job = queue.add("long", {})
    reported: List[BaseException] = []
    first = Worker("outage", handler("first"), connection=url, lock_duration=5,
                   stalled_interval=0.5)
    first.on("error", reported.append)
    with first:
        wait_until(lambda: runs == ["first"], 20, "the first worker to take the job")
        with Worker("outage", handler("second"), connection=url, lock_duration=5,
                    stalled_interval=0.5):
            outage(aof_redis, r, queue.keys.job(job.id) + ":lock", timing, 1.8)
            wait_until(lambda: queue.get_job_state(job.id) == "completed", 40)
    assert runs == ["first"]
    assert queue.get_job(job.id).returnvalue == "first"
    assert completed_events(r, queue, job.id) == 1
    assert not [e for e in reported if isinstance(e, errors.LockLost)]
    queue.close()
    r.close()


def test_a_job_finished_during_an_outage_is_recorded_once(aof_redis):
    url = aof_redis.url
    r = redis.Redis.from_url(url, decode_responses=True)
    queue = Queue("finish", connection=url)
    release = threading.Event()
    runs: List[str] = []

    def handler(job):
        runs.append(job.id)
        release.wait(30)
        return "done"

    job = queue.add("x", {})
    reported: List[BaseException] = []
    worker = Worker("finish", handler, connection=url, lock_duration=4, stalled_interval=0.5)
    worker.on("error", reported.append)
    with worker:
        wait_until(lambda: runs == [job.id], 20)
        first, second = lock_renewals(r, queue.keys.job(job.id) + ":lock", 2)
        time.sleep(max(second + (second - first) - 0.2 - time.monotonic(), 0))
        aof_redis.halt()
        release.set()                # it finishes while Redis is down: the write retries
        time.sleep(1.8)
        aof_redis.restart()
        wait_until(lambda: queue.get_job_state(job.id) == "completed", 40)
        time.sleep(1.0)              # a rerun would start now (the job would be back in wait)
    assert runs == [job.id]
    assert queue.get_job(job.id).returnvalue == "done"
    assert completed_events(r, queue, job.id) == 1
    assert not [e for e in reported if isinstance(e, errors.LockLost)]
    queue.close()
    r.close()
