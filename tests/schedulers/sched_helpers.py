"""Helpers shared by the job scheduler tests."""
from __future__ import annotations

import threading
from typing import Any, Callable, List

import redis

from orijs_sync.testing import wait_until  # noqa: F401 - re-exported for the tests


def run_millis(job_id: str) -> int:
    """The run time encoded in a scheduler job id ``repeat:<id>:<ms>``."""
    assert job_id.startswith("repeat:"), job_id
    return int(job_id.rsplit(":", 1)[1])


def pending_runs(r: redis.Redis, qname: str) -> List[str]:
    """Jobs of the queue that no worker has taken yet."""
    base = f"bull:{qname}:"
    return sorted(r.zrange(base + "delayed", 0, -1) + r.zrange(base + "prioritized", 0, -1)
                  + r.lrange(base + "wait", 0, -1) + r.lrange(base + "paused", 0, -1))


class Runs:
    """A handler that records the ids it ran, thread-safely."""

    def __init__(self, fn: Callable[[Any], Any] = lambda job: None) -> None:
        self.fn = fn
        self.ids: List[str] = []
        self.jobs: List[Any] = []
        self._lock = threading.Lock()

    def __call__(self, job: Any) -> Any:
        with self._lock:
            self.ids.append(job.id)
            self.jobs.append(job)
        return self.fn(job)

    def __len__(self) -> int:
        with self._lock:
            return len(self.ids)
