"""Settling a ``concurrent.futures.Future`` from whichever thread comes first."""
from __future__ import annotations

import math
from concurrent.futures import Future
from typing import Any, Callable, Optional, cast

from . import _validate as check
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


def wait_timeout(timeout: Any, arg: str = "timeout") -> Optional[float]:
    """A timeout for a blocking wait: ``None`` or ``inf`` wait forever, a longer wait than
    the OS timer holds is capped; nan, negative or non-numbers are refused."""
    if isinstance(timeout, float) and timeout == math.inf:
        return None
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) \
            and math.isfinite(timeout) and timeout > check.MAX_SECONDS:
        return check.MAX_SECONDS
    return check.seconds(timeout, arg)


class CheckedFuture(Future):  # type: ignore[type-arg]
    """A Future whose waits check their timeout and time out with ``errors.TimeoutError``."""

    def result(self, timeout: Optional[float] = None) -> Any:
        return self._wait(super().result, timeout)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        return cast("Optional[BaseException]", self._wait(super().exception, timeout))

    def _wait(self, wait: Callable[[Optional[float]], Any], timeout: Any) -> Any:
        return _bounded_wait(wait, self.done, timeout,
                             lambda: errors.TimeoutError(f"not finished within {timeout}s"))


def _bounded_wait(wait: Callable[[Optional[float]], Any], done: Callable[[], bool],
                  timeout: Any, on_timeout: Callable[[], errors.TimeoutError]) -> Any:
    """``wait(timeout)`` with the timeout checked; a wait cut short by it (not the
    future's own outcome) raises ``on_timeout()``."""
    try:
        return wait(wait_timeout(timeout))
    except TimeoutError as exc:
        if isinstance(exc, errors.OrijsError) or done():   # the future's own outcome
            raise
        raise on_timeout() from None


def no_result(what: str, job_id: Optional[str], seconds: Optional[float]) -> errors.TimeoutError:
    """The error of a wait that timed out, naming what it waited for:
    ``event 'order.created' (job 42) got no result within 5.0 s``."""
    return errors.TimeoutError(f"{what} (job {job_id}) got no result within "
                               f"{float(seconds or 0)} s")


def result_or_named_timeout(fut: "Future[Any]", timeout: Optional[float], what: str,
                            job_id: Optional[str]) -> Any:
    """``Future.result(timeout)``, but a wait cut short by ``timeout`` raises
    :func:`no_result` (an ``errors.TimeoutError``) instead of an empty ``TimeoutError``."""
    return _bounded_wait(lambda seconds: Future.result(fut, seconds), fut.done, timeout,
                         lambda: no_result(what, job_id, timeout))
