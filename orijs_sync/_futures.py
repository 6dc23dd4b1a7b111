"""Settling a ``concurrent.futures.Future`` from whichever thread comes first."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Optional


def settle(fut: "Future[Any]", result: Any = None, exc: Optional[BaseException] = None) -> bool:
    """Set the result (or ``exc``) unless the future is done or cancelled already;
    a later call is a no-op. Returns whether this call settled it."""
    if fut.done():
        return False
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
        return True
    except Exception:  # noqa: BLE001 - InvalidStateError: another thread settled it meanwhile
        return False
