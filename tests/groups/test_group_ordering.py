"""Ordering "in-memory" on real Redis: GroupMQ's grace collection (the wait runs from
the worker's pickup, restarts on arrivals, is capped, and covers a batch of jobs) and
the validation of its options. Waits are generous guards; nothing asserts on timing."""
from __future__ import annotations

import threading
import time

import pytest
import redis as redis_py

from orijs_sync import errors
from orijs_sync.groups import GroupQueue, GroupWorker
from orijs_sync.groups.testing import check_runs, record
from orijs_sync.testing import wait_until


def _recorder(url: str, log: str):
    r = redis_py.Redis.from_url(url, decode_responses=True)

    def handler(job):
        record(r, log, "start", job.id, job.group_id, job.data["n"], "py")
        record(r, log, "end", job.id, job.group_id, job.data["n"], "py")
    return handler, r


def test_grace_runs_from_pickup_not_from_order_ms(redis_url, gname):
    """A job whose order_ms is long past is still held for the window after pickup,
    so an even older job arriving meanwhile runs first (the former hold, measured
    from order_ms, ran the first job at once)."""
    gq = GroupQueue(gname, connection=redis_url, ordering="in-memory", ordering_window=2)
    handler, r = _recorder(redis_url, f"{gname}:log")
    old = int(time.time() * 1000) - 60_000
    with GroupWorker(gq, handler):
        gq.add(group_id="g", data={"n": 2}, order_ms=old)
        wait_until(lambda: gq.get_group_job_count("g") == 0, 30)     # picked up
        gq.add(group_id="g", data={"n": 1}, order_ms=old - 10_000)
        assert gq.wait_for_empty(30)
    assert check_runs(r.lrange(f"{gname}:log", 0, -1)) == {"g": [1, 2]}
    gq.close()


def test_batch_runs_collected_jobs_in_order(redis_url, gname):
    """Jobs already waiting when the collection ends run in order_ms order."""
    gq = GroupQueue(gname, connection=redis_url, ordering="in-memory", ordering_window=0.3,
                    ordering_max_batch_size=3)
    handler, r = _recorder(redis_url, f"{gname}:log")
    now = int(time.time() * 1000)
    for n in (5, 3, 4, 1, 2):
        gq.add(group_id="g", data={"n": n}, order_ms=now + n)
    with GroupWorker(gq, handler):
        assert gq.wait_for_empty(30)
    assert check_runs(r.lrange(f"{gname}:log", 0, -1)) == {"g": [1, 2, 3, 4, 5]}
    gq.close()


@pytest.mark.parametrize("kwargs", [
    {"ordering_max_wait_multiplier": 0.5}, {"ordering_max_wait_multiplier": "3"},
    {"ordering_max_wait_multiplier": float("inf")}, {"ordering_grace_period_decay": 0},
    {"ordering_grace_period_decay": 1.5}, {"ordering_grace_period_decay": True},
    {"ordering_max_batch_size": 0}, {"ordering_max_batch_size": 2.5},
])
def test_in_memory_options_are_validated(redis_url, gname, kwargs):
    with pytest.raises(errors.OrijsError):
        GroupQueue(gname, connection=redis_url, ordering="in-memory", ordering_window=0.1,
                   **kwargs)


def test_in_memory_options_are_kept(redis_url, gname):
    gq = GroupQueue(gname, connection=redis_url, ordering="in-memory", ordering_window=0.05,
                    ordering_max_wait_multiplier=8, ordering_grace_period_decay=0.9,
                    ordering_max_batch_size=20)
    assert (gq.ordering_max_wait_multiplier, gq.ordering_grace_period_decay,
            gq.ordering_max_batch_size) == (8.0, 0.9, 20)
    gq.close()


def test_a_new_collection_after_the_batch(redis_url, gname):
    """With ordering_max_batch_size=1, the collection started by the first job covers
    one more (the second); the third starts a new one, so a job older than all,
    added while the third is held, runs before it (the former hold, measured from
    order_ms, ran the third at once). ``n`` is the expected run position."""
    gq = GroupQueue(gname, connection=redis_url, ordering="in-memory", ordering_window=2,
                    ordering_max_batch_size=1)
    handler, r = _recorder(redis_url, f"{gname}:log")
    release = threading.Event()

    def gated(job):
        if job.data["n"] == 2:
            release.wait(30)
        handler(job)
    old = int(time.time() * 1000) - 60_000
    for n, order in ((1, old + 1), (2, old + 2), (4, old + 3)):
        gq.add(group_id="g", data={"n": n}, order_ms=order)
    with GroupWorker(gq, gated, concurrency=1) as w:
        wait_until(lambda: any(c["job"].data["n"] == 2 for c in w.get_current_jobs()), 30)
        release.set()
        wait_until(lambda: gq.get_group_job_count("g") == 0, 30)      # the third held
        gq.add(group_id="g", data={"n": 3}, order_ms=old)
        assert gq.wait_for_empty(30)
    assert check_runs(r.lrange(f"{gname}:log", 0, -1)) == {"g": [1, 2, 3, 4]}
    gq.close()
