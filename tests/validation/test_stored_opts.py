"""Stored options another program (or an older version, or a hand) wrote, which the
stored-opts check accepts: the worker must honour each one, so its job ends completed,
failed or delayed, and never stays active to stall and run again."""
from __future__ import annotations

import json
import time
from typing import Any, Dict

import pytest
import redis

from orijs_sync import Queue, Worker
from orijs_sync.testing import wait_until

TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000


def failing(job: Any) -> Any:
    if job.data.get("fail"):
        raise RuntimeError(f"attempt {job.attempts_made + 1} failed")
    return job.data.get("i")


def store_opts(queue: Queue, r: redis.Redis, opts: Dict[str, Any], **fields: Any) -> str:
    job = queue.add("x", {"fail": True})
    r.hset(queue.keys.job(job.id), mapping={"opts": json.dumps(opts), **fields})
    return job.id


def run_until(queue: Queue, redis_url: str, job_id: str, state: str) -> None:
    """Run a failing handler on the queue until the job is in ``state``."""
    with Worker(queue.name, failing, connection=redis_url):
        wait_until(lambda: queue.get_job_state(job_id) == state, timeout=10,
                   what=f"job {job_id} {state}")


def retry_due_ms(queue: Queue, r: redis.Redis, job_id: str) -> float:
    """How far ahead the job's retry is due (BullMQ's delayed score: ms * 0x1000 + n)."""
    return (int(r.zscore(queue.keys.delayed, job_id)) >> 12) - time.time() * 1000


def test_a_stored_numeric_backoff_is_a_fixed_delay(queue: Queue, r: redis.Redis,
                                                   redis_url: str) -> None:
    """``backoff: 60000`` (a number: BullMQ's fixed delay in ms) retries after a minute."""
    job_id = store_opts(queue, r, {"attempts": 3, "backoff": 60000})
    run_until(queue, redis_url, job_id, "delayed")
    assert 50_000 < retry_due_ms(queue, r, job_id) <= 60_000
    assert queue.get_job(job_id).attempts_made == 1


def test_an_exponential_backoff_past_any_score_waits_ten_years(queue: Queue, r: redis.Redis,
                                                               redis_url: str) -> None:
    """After 3,000 attempts 2 ** 2999 seconds is no score Redis can store: the retry is
    delayed by the longest delay an add accepts instead of the job staying active."""
    job_id = store_opts(queue, r, {"attempts": 5000,
                                   "backoff": {"type": "exponential", "delay": 1000}},
                        atm=3000)
    run_until(queue, redis_url, job_id, "delayed")
    assert abs(retry_due_ms(queue, r, job_id) - TEN_YEARS_MS) < 60_000


@pytest.mark.parametrize("limit,kept", [(2.0, 2), (None, 3)])
def test_a_stack_trace_limit_written_as_a_float_or_null_is_honoured(
        queue: Queue, r: redis.Redis, redis_url: str, limit: Any, kept: int) -> None:
    """2.0 keeps two traces; null (JSON) is as unset: up to 10, so all three are kept."""
    job_id = store_opts(queue, r, {"attempts": 3, "stackTraceLimit": limit})
    run_until(queue, redis_url, job_id, "failed")
    job = queue.get_job(job_id)
    assert job.attempts_made == 3 and len(job.stacktrace) == kept
    assert "attempt 3 failed" in job.stacktrace[-1]
