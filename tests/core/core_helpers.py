"""Helpers shared by the core tests."""
from __future__ import annotations

import threading
import time
from typing import Callable


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll until predicate() is true; fail the test after ``timeout`` (a guard, not a measure)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def orijs_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("orijs-")]
