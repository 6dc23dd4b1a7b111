"""Helpers shared by the event layer tests."""
from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional

from orijs_sync.events import EventMessage
from orijs_sync.testing import orijs_threads, wait_until  # noqa: F401 - re-exported for the tests


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
