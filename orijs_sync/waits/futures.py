"""Settling a ``concurrent.futures.Future`` from whichever thread comes first."""
from __future__ import annotations

import logging
import math
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

from .. import errors
from ..base import validate as check

if TYPE_CHECKING:  # pragma: no cover
    from ..base.lanes import Lanes

log = logging.getLogger(__name__)


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
    """A Future whose waits check their timeout and time out with ``errors.TimeoutError``.

    With a callback lane (``callbacks``, the provider's: see ``base.lanes``), a done-callback
    runs in the thread that settles the Future, as ``Future`` runs it (the caller's, for
    one added after the outcome or settled by the caller's ``cancel()``), unless that
    thread is one of the library's (a worker's handler thread, whose slot it would
    hold; a thread ``stop()`` joins): then on that lane (in the settling thread once
    the lane is closed)."""

    def __init__(self, callbacks: "Optional[Lanes]" = None) -> None:
        super().__init__()
        self._callbacks = callbacks

    def add_done_callback(self, fn: Callable[["Future[Any]"], object]) -> None:
        lanes = self._callbacks
        if lanes is None or self.done():
            super().add_done_callback(fn)
            return

        def on_lane(fut: "Future[Any]") -> None:
            if not _library_thread() or not lanes.submit(lambda: _call_back(fn, fut), key=0):
                _call_back(fn, fut)

        super().add_done_callback(on_lane)

    def result(self, timeout: Optional[float] = None) -> Any:
        return self._wait(super().result, timeout)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        return cast("Optional[BaseException]", self._wait(super().exception, timeout))

    def _wait(self, wait: Callable[[Optional[float]], Any], timeout: Any) -> Any:
        return _bounded_wait(wait, self.done, timeout,
                             lambda: errors.TimeoutError(f"not finished within {timeout}s"))


def _library_thread() -> bool:
    """The calling thread is one orijs_sync started (it names each ``orijs-...``)."""
    return threading.current_thread().name.startswith("orijs-")


def _call_back(fn: Callable[["Future[Any]"], object], fut: "Future[Any]") -> None:
    try:
        fn(fut)
    except Exception:  # noqa: BLE001 - as Future logs a failing callback
        log.exception("exception calling callback for %r", fut)


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


def no_result(what: str, job_id: Optional[str], seconds: Optional[float],
              why: str = "") -> errors.TimeoutError:
    """The error of a wait that timed out, naming what it waited for:
    ``event 'order.created' (job 42) got no result within 5.0 s`` (then ``why``)."""
    named = f"{what} (job {job_id})" if job_id is not None else what
    return errors.TimeoutError(f"{named} got no result within {float(seconds or 0)} s{why}")


def result_or_named_timeout(fut: "Future[Any]", timeout: Optional[float], what: str,
                            job_id: Optional[str]) -> Any:
    """``Future.result(timeout)``, but a wait cut short by ``timeout`` raises
    ``no_result`` (an ``errors.TimeoutError``) instead of an empty ``TimeoutError``."""
    return _bounded_wait(lambda seconds: Future.result(fut, seconds), fut.done, timeout,
                         lambda: no_result(what, job_id, timeout))
