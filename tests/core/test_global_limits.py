"""Queue-wide limits from the API: global concurrency and rate limit (the queue's meta
hash, BullMQ's fields), the limiter key (rate_limit, its ttl, its removal), and a
handler's manual rate limit on a worker with or without a ``limiter``."""
from __future__ import annotations

import math
import threading
import time
from typing import List, Tuple

import pytest

from orijs_sync import Worker, errors
from orijs_sync.testing import wait_until

GUARD = 30.0


class Overlap:
    """Records when handlers run; ``most`` is how many ran at once at most."""

    def __init__(self, sleep: float) -> None:
        self.sleep = sleep
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.starts: List[float] = []

    def __call__(self, job) -> str:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.starts.append(time.monotonic())
        time.sleep(self.sleep)
        with self.lock:
            self.running -= 1
        return "ok"


def add_many(queue, n: int) -> None:
    queue.add_bulk([{"name": "x", "data": {"i": i}} for i in range(n)])


# -- global concurrency -------------------------------------------------------------

def test_global_concurrency_is_stored_read_and_removed_as_bullmq_does(queue, r):
    assert queue.get_global_concurrency() is None
    queue.set_global_concurrency(3)
    assert r.hget(queue.keys.meta, "concurrency") == "3"
    assert queue.get_global_concurrency() == 3
    assert queue.remove_global_concurrency() is True
    assert r.hget(queue.keys.meta, "concurrency") is None
    assert queue.remove_global_concurrency() is False
    assert queue.get_global_concurrency() is None


@pytest.mark.parametrize("bad, error", [(0, errors.InvalidArgument), (-1, errors.InvalidArgument),
                                        (1.5, errors.InvalidArgumentType),
                                        ("2", errors.InvalidArgumentType),
                                        (True, errors.InvalidArgumentType)])
def test_set_global_concurrency_refuses_bad_values_and_writes_nothing(queue, r, bad, error):
    with pytest.raises(error, match="concurrency"):
        queue.set_global_concurrency(bad)
    assert r.hget(queue.keys.meta, "concurrency") is None


def test_workers_together_never_run_more_jobs_than_the_global_concurrency(queue, redis_url, qname):
    queue.set_global_concurrency(2)
    add_many(queue, 8)
    handler = Overlap(0.15)
    with Worker(qname, handler, connection=redis_url, concurrency=4, drain_delay=0.2), \
            Worker(qname, handler, connection=redis_url, concurrency=4, drain_delay=0.2):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 8, GUARD)
    assert handler.most == 2


# -- global rate limit --------------------------------------------------------------

def test_global_rate_limit_is_stored_in_ms_read_in_seconds_and_removed(queue, r):
    assert queue.get_global_rate_limit() is None
    queue.set_global_rate_limit(5, 1.5)
    assert r.hmget(queue.keys.meta, "max", "duration") == ["5", "1500"]
    assert queue.get_global_rate_limit() == {"max": 5, "duration": 1.5}
    r.hdel(queue.keys.meta, "duration")
    assert queue.get_global_rate_limit() is None          # both or nothing, as BullMQ
    assert queue.remove_global_rate_limit() is True
    assert r.hmget(queue.keys.meta, "max", "duration") == [None, None]
    assert queue.remove_global_rate_limit() is False


@pytest.mark.parametrize("max_jobs, duration, arg", [(0, 1, "max"), (1.0, 1, "max"),
                                                     (2, 0, "duration"), (2, -1, "duration"),
                                                     (2, "1", "duration"),
                                                     (2, 0.0001, "duration")])
def test_set_global_rate_limit_refuses_bad_values_and_writes_nothing(queue, r, max_jobs,
                                                                     duration, arg):
    with pytest.raises(errors.ValidationError, match=arg):
        queue.set_global_rate_limit(max_jobs, duration)
    assert r.hmget(queue.keys.meta, "max", "duration") == [None, None]


def test_workers_without_a_limiter_obey_the_global_rate_limit(queue, redis_url, qname):
    queue.set_global_rate_limit(2, 0.5)
    add_many(queue, 6)
    handler = Overlap(0)
    with Worker(qname, handler, connection=redis_url, concurrency=4), \
            Worker(qname, handler, connection=redis_url, concurrency=4):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 6, GUARD)
    starts = sorted(handler.starts)
    # 2 per 0.5 s: the 5th job starts no sooner than two windows after the 1st.
    assert starts[4] - starts[0] >= 0.9
    assert queue.get_rate_limit_ttl() >= 0


# -- the limiter key ----------------------------------------------------------------

def test_rate_limit_sets_the_limiter_key_as_bullmq_and_its_ttl_reads_back(queue, r):
    assert queue.get_rate_limit_ttl() == 0.0              # no key
    queue.rate_limit(60)
    assert r.get(queue.keys.limiter) == str(2 ** 53 - 1)
    assert 30_000 < r.pttl(queue.keys.limiter) <= 60_000
    assert 30.0 < queue.get_rate_limit_ttl() <= 60.0
    assert 30.0 < queue.get_rate_limit_ttl(max_jobs=10) <= 60.0
    assert queue.remove_rate_limit_key() is True
    assert queue.get_rate_limit_ttl() == 0.0
    assert queue.remove_rate_limit_key() is False


def test_rate_limit_ttl_counts_against_the_max(queue, r):
    r.set(queue.keys.limiter, 3, px=60_000)              # a limiter that counted 3 jobs
    assert queue.get_rate_limit_ttl(max_jobs=5) == 0.0    # under 5: not limited
    assert queue.get_rate_limit_ttl(max_jobs=3) > 30
    assert queue.get_rate_limit_ttl() > 30                # no max at all: the key's ttl
    queue.set_global_rate_limit(10, 1)
    assert queue.get_rate_limit_ttl() == 0.0              # the global max counts
    r.persist(queue.keys.limiter)
    r.hdel(queue.keys.meta, "max")
    assert queue.get_rate_limit_ttl() == math.inf        # a key without expiry


@pytest.mark.parametrize("call", [lambda q: q.rate_limit(0), lambda q: q.rate_limit(-1),
                                  lambda q: q.rate_limit("1"), lambda q: q.rate_limit(None),
                                  lambda q: q.get_rate_limit_ttl(0),
                                  lambda q: q.get_rate_limit_ttl(1.5)])
def test_limiter_key_calls_refuse_bad_values(queue, r, call):
    with pytest.raises(errors.ValidationError):
        call(queue)
    assert not r.exists(queue.keys.limiter)


def test_a_worker_with_a_limiter_waits_out_a_queue_rate_limit(queue, redis_url, qname):
    queue.rate_limit(0.8)
    set_at = time.monotonic()
    job = queue.add("x", {})
    ran: List[float] = []
    with Worker(qname, lambda j: ran.append(time.monotonic()), connection=redis_url,
                limiter={"max": 100, "duration": 1}):
        wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD)
    assert ran[0] - set_at >= 0.7


# -- a handler's manual rate limit ----------------------------------------------------

def manual_limit_run(queue, redis_url, qname, **worker_kw) -> Tuple[List[float], int]:
    """A job whose first run calls worker.rate_limit(0.5) and raises RateLimitError:
    when each run started, and the job's attempts made once completed."""
    runs: List[float] = []

    def handler(job):
        runs.append(time.monotonic())
        if len(runs) == 1:
            worker.rate_limit(0.5)
            raise errors.RateLimitError()
        return "ok"

    job = queue.add("x", {}, attempts=1)
    worker = Worker(qname, handler, connection=redis_url, **worker_kw)
    with worker:
        wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD)
    return runs, queue.get_job(job.id).attempts_made


def test_manual_rate_limit_without_a_limiter_waits_for_the_limit_as_node_does(queue, redis_url,
                                                                             qname):
    runs, attempts_made = manual_limit_run(queue, redis_url, qname, concurrency=3)
    assert len(runs) == 2 and runs[1] - runs[0] >= 0.45
    assert attempts_made == 1         # the limited run is not counted (attempts=1: no retry)


def test_manual_rate_limit_with_a_limiter_still_waits(queue, redis_url, qname):
    runs, attempts_made = manual_limit_run(queue, redis_url, qname,
                                           limiter={"max": 100, "duration": 1})
    assert len(runs) == 2 and runs[1] - runs[0] >= 0.45
    assert attempts_made == 1


def test_rate_limit_error_while_a_queue_limit_holds_waits_it_out(queue, redis_url, qname):
    """A handler of a worker without a limiter raises RateLimitError while another
    process's queue.rate_limit() holds: the job runs again once the limit passed."""
    runs: List[float] = []

    def handler(job):
        runs.append(time.monotonic())
        if len(runs) == 1:
            queue.rate_limit(0.6)
            raise errors.RateLimitError()
        return "ok"

    job = queue.add("x", {})
    with Worker(qname, handler, connection=redis_url):
        wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD)
    assert len(runs) == 2 and runs[1] - runs[0] >= 0.55


def test_worker_rate_limit_refuses_bad_seconds(queue, redis_url, qname, r):
    worker = Worker(qname, lambda j: None, connection=redis_url)
    try:
        for bad in (-1, "1", None, float("nan")):
            with pytest.raises(errors.ValidationError, match="seconds"):
                worker.rate_limit(bad)
        worker.rate_limit(0)                  # nothing to hold back
        assert not r.exists(queue.keys.limiter)
    finally:
        worker.close()
