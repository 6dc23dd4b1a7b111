"""Helpers shared by the event layer tests."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, List, Optional

from orijs_sync.events import EventMessage


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0,
               what: str = "condition") -> None:
    """Poll until predicate() is true; fail after ``timeout`` (a guard, not a measure)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Recorder:
    """A handler that records the messages it receives and returns ``result(message)``."""

    def __init__(self, result: Optional[Callable[[EventMessage], Any]] = None) -> None:
        self.result = result or (lambda m: m.payload)
        self.messages: List[EventMessage] = []
        self._cond = threading.Condition()

    def __call__(self, message: EventMessage) -> Any:
        with self._cond:
            self.messages.append(message)
            self._cond.notify_all()
        return self.result(message)

    def wait_for(self, count: int, timeout: float = 15.0) -> List[EventMessage]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.messages) >= count, timeout):
                raise AssertionError(f"handler got {len(self.messages)} messages, "
                                     f"expected {count}")
            return list(self.messages)


def all_zero(provider: Any) -> bool:
    return all(v == 0 for v in provider.stats().values())


def orijs_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("orijs-") and t.is_alive()]
