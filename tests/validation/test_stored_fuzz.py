"""Every odd value in every field a worker reads back, at once, among normal jobs: each
job must end (completed, failed, delayed for a retry, or removed by another job's keep
option), none may stay active or waiting, and the worker must close in time. A guard
for the cases the poison and stored-opts tests name one by one, and for fields added
later."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import redis

from orijs_sync import Queue, Worker
from orijs_sync.testing import wait_until

ODD_JSON: List[Any] = [None, True, False, 0, -1, 1.5, 2.0, 1e300, -1e300, 2 ** 63, -(2 ** 70),
                       "", "abc", "1", [], [1], {}, {"type": "fixed"}, {"type": 5},
                       {"type": "exponential", "delay": 1e308}, {"count": 1.5},
                       {"age": -1, "count": 2 ** 63, "limit": 0.5}, {"foo": "bar"}]
OPTS = ["attempts", "delay", "priority", "stackTraceLimit", "kl", "lifo", "backoff",
        "removeOnComplete", "removeOnFail", "jobId", "repeat", "parent"]
ODD_TEXT = ["", "abc", "1e400", "-1", "99999999999999999999999", "1.5", "nan", "-inf", "[]",
            "{}", "null"]
FIELDS = ["atm", "ats", "stc", "priority", "delay", "processedOn", "finishedOn", "deid",
          "rjk", "defa", "pb", "parentKey", "parent", "returnvalue", "failedReason",
          "stacktrace", "progress", "name", "timestamp", "data", "opts"]
ENDED = ("completed", "failed", "delayed", "unknown")


def handler(job: Any) -> Any:
    if isinstance(job.data, dict) and job.data.get("fail"):
        raise RuntimeError("failed on purpose")
    return 1


def run_all(queue: Queue, redis_url: str, cases: Dict[str, Tuple[str, Any, bool]]) -> None:
    normal = [queue.add("normal", {}).id for _ in range(10)]
    worker = Worker(queue.name, handler, connection=redis_url, concurrency=4).start()
    try:
        wait_until(lambda: queue.get_job_counts("active", "waiting", "prioritized")
                   == {"active": 0, "waiting": 0, "prioritized": 0, "paused": 0}, timeout=30,
                   what="every job ended")
    finally:
        closed = worker.close(timeout=5)
    stuck = {job_id: case for job_id, case in cases.items()
             if queue.get_job_state(job_id) not in ENDED}
    assert stuck == {} and closed is True
    assert all(queue.get_job_state(j) in ("completed", "unknown") for j in normal)


def test_every_odd_stored_option_ends_its_job(queue: Queue, r: redis.Redis,
                                             redis_url: str) -> None:
    cases: Dict[str, Tuple[str, Any, bool]] = {}
    for key in OPTS:
        for value in ODD_JSON:
            for fail in (False, True):
                opts = {"attempts": 2, "backoff": {"type": "fixed", "delay": 10}} if fail else {}
                opts[key] = value
                job = queue.add("odd", {"fail": fail})
                r.hset(queue.keys.job(job.id), "opts", json.dumps(opts))
                cases[job.id] = (key, value, fail)
    run_all(queue, redis_url, cases)


def test_every_odd_job_field_ends_its_job(queue: Queue, r: redis.Redis, redis_url: str) -> None:
    cases: Dict[str, Tuple[str, Any, bool]] = {}
    for field in FIELDS:
        for value in ODD_TEXT:
            for fail in (False, True):
                job = queue.add("odd", {"fail": fail}, attempts=2, backoff=0.01)
                r.hset(queue.keys.job(job.id), field, value)
                cases[job.id] = (field, value, fail)
    run_all(queue, redis_url, cases)
