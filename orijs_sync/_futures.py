"""Settling a ``concurrent.futures.Future`` from whichever thread comes first."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Optional

from . import errors


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


def no_result(what: str, job_id: Optional[str], seconds: Optional[float]) -> errors.TimeoutError:
    """The error of a wait that timed out, naming what it waited for:
    ``event 'order.created' (job 42) got no result within 5.0 s``."""
    return errors.TimeoutError(f"{what} (job {job_id}) got no result within "
                               f"{float(seconds or 0)} s")


def result_or_named_timeout(fut: "Future[Any]", timeout: Optional[float], what: str,
                            job_id: Optional[str]) -> Any:
    """``Future.result(timeout)``, but a wait cut short by ``timeout`` raises
    :func:`no_result` (an ``errors.TimeoutError``) instead of an empty ``TimeoutError``."""
    try:
        return Future.result(fut, timeout)
    except TimeoutError as exc:
        if isinstance(exc, errors.OrijsError):    # the future's own outcome: named already
            raise
        raise no_result(what, job_id, timeout) from None
