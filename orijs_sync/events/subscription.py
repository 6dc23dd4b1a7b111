"""EventSubscription: the Future that ``emit`` returns."""
from __future__ import annotations

import json
import logging
from concurrent.futures import CancelledError, Future
from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import errors
from ..waits.futures import CheckedFuture, result_or_named_timeout, settle

if TYPE_CHECKING:  # pragma: no cover
    from ..base.lanes import Lanes

__all__ = ["EventSubscription"]

log = logging.getLogger(__name__)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")     # JSON.parse refuses NaN and Infinity


def as_orijs_delivers(result: Any) -> Any:
    """An OriJS emitter gets a handler's value parsed twice (BullMQ's QueueEvents parses
    the stored ``returnvalue``, then OriJS's tracker parses any string it gets), so a
    handler returning the text ``'{"a": 1}'`` delivers ``{"a": 1}`` and ``"42"``
    delivers ``42``; other strings arrive unchanged. Ours deliver the same."""
    if not isinstance(result, str):
        return result
    try:
        return json.loads(result, parse_constant=_no_constant)
    except ValueError:
        return result


class EventSubscription(CheckedFuture):
    """Settled with the handler's return value, or failed with ``JobFailed``,
    ``errors.TimeoutError`` (the emit's timeout), ``errors.ShutdownError`` (the
    provider stopped) or the error that kept the event from being enqueued.

    ``cancel()`` removes the event from its queue if it has not started (a
    delayed or waiting event) and then cancels the future; it returns False
    once a handler has taken the event, as ``Future.cancel`` does for a running call.

    OriJS's conveniences on top: ``subscribe(on_result)`` and ``catch(on_error)``
    (chainable; a callback added after the outcome runs at once, in the caller's
    thread, else in the thread that settles it, or on the provider's callback thread
    when that is one of the library's (see ``CheckedFuture``), never under a library
    lock; what it raises is logged) and ``is_resolved`` / ``is_rejected`` /
    ``is_settled``.
    """

    def __init__(self, event_name: str, event_id: str, correlation_id: str, job_id: str,
                 *, queue_name: Optional[str] = None,
                 canceller: Optional[Callable[["EventSubscription"], bool]] = None,
                 callbacks: "Optional[Lanes]" = None) -> None:
        super().__init__(callbacks)
        self.event_name = event_name
        self.event_id = event_id
        self.correlation_id = correlation_id
        self.job_id = job_id
        self.queue_name = queue_name
        self._canceller = canceller

    def __repr__(self) -> str:
        state = ("cancelled" if self.cancelled() else "finished" if self.done()
                 else "pending")
        return f"<EventSubscription {self.event_name} job={self.job_id} {state}>"

    def result(self, timeout: Optional[float] = None) -> Any:
        """The handler's result; a wait cut short by ``timeout`` raises an
        ``errors.TimeoutError`` naming the event, its job id and the seconds waited."""
        return result_or_named_timeout(self, timeout, f"event {self.event_name!r}", self.job_id)

    # -- OriJS's conveniences -------------------------------------------------
    def subscribe(self, on_result: Callable[[Any], Any]) -> "EventSubscription":
        """Call ``on_result(value)`` once the handler's value arrives; returns self."""
        return self._on_outcome(on_result, ok=True)

    def catch(self, on_error: Callable[[BaseException], Any]) -> "EventSubscription":
        """Call ``on_error(exc)`` if the emit fails (``CancelledError`` when cancelled);
        returns self."""
        return self._on_outcome(on_error, ok=False)

    def _on_outcome(self, fn: Callable[[Any], Any], ok: bool) -> "EventSubscription":
        if not callable(fn):
            raise errors.InvalidArgumentType(f"the callback must be callable, not {type(fn).__name__}")

        def done(fut: "Future[Any]") -> None:
            error = CancelledError() if fut.cancelled() else fut.exception()
            if (error is None) != ok:
                return
            try:
                fn(fut.result() if ok else error)
            except Exception:  # noqa: BLE001 - a callback's failure is the caller's
                log.exception("event %s: %s callback %r failed", self.event_name,
                              "subscribe" if ok else "catch", fn)

        self.add_done_callback(done)
        return self

    @property
    def is_settled(self) -> bool:
        return self.done()

    @property
    def is_resolved(self) -> bool:
        return self.done() and not self.cancelled() and self.exception() is None

    @property
    def is_rejected(self) -> bool:
        return self.done() and (self.cancelled() or self.exception() is not None)

    # Settling from any thread, whoever comes first wins; later calls are no-ops.
    def _resolve(self, result: Any) -> None:
        settle(self, as_orijs_delivers(result))

    def _reject(self, exc: BaseException) -> None:
        settle(self, exc=exc)

    def _cancel_local(self) -> bool:
        """Cancel the future itself (the event was removed from its queue)."""
        return super().cancel()

    def cancel(self) -> bool:
        if self.done():
            return self.cancelled()
        if self._canceller is None:
            return super().cancel()
        self._canceller(self)
        return self.cancelled()
