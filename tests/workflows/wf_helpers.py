"""Helpers shared by the workflow tests."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, List

GUARD = 30.0   # seconds: a failure guard on every wait, never a measure


def wait_until(predicate: Callable[[], bool], timeout: float = GUARD,
               what: str = "condition") -> None:
    """Poll until predicate() is true; fail after ``timeout`` (a guard, not a measure)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Journal:
    """A thread-safe list of what handlers did, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: List[Any] = []

    def add(self, entry: Any) -> None:
        with self._lock:
            self.entries.append(entry)

    def __iter__(self) -> Any:
        with self._lock:
            return iter(list(self.entries))

    def count(self, entry: Any) -> int:
        with self._lock:
            return self.entries.count(entry)

    def step(self, name: str, result: Any = None, fail: bool = False) -> Callable[[Any], Any]:
        """A step handler recording ``name``; returns ``result`` (default: the names of
        the results it saw) or raises ValueError."""
        def handler(ctx: Any) -> Any:
            self.add(name)
            if fail:
                raise ValueError(f"{name} failed")
            return sorted(ctx.results) if result is None else result
        handler.__name__ = f"step_{name}"
        return handler

    def rollback(self, name: str, fail: bool = False) -> Callable[[Any], Any]:
        def handler(ctx: Any) -> None:
            self.add(f"rollback:{name}")
            if fail:
                raise RuntimeError(f"rollback {name} failed")
        handler.__name__ = f"rollback_{name}"
        return handler
