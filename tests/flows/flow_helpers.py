"""Helpers shared by the flow tests."""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List

import redis

from orijs_sync.testing import wait_until  # noqa: F401 - re-exported for the tests


def keys_of(r: redis.Redis, namespace: str) -> List[str]:
    return sorted(r.scan_iter(match=f"*{namespace}*", count=1000))


class Recorder:
    """A handler wrapper that remembers what it saw per job name, thread-safely."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.seen: Dict[str, List[Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, job: Any) -> Any:
        with self._lock:
            self.seen.setdefault(job.name, []).append(job.id)
        return self.fn(job)

    def count(self, name: str) -> int:
        with self._lock:
            return len(self.seen.get(name, []))
