"""EventSubscription: the Future that ``emit`` returns."""
from __future__ import annotations

from typing import Any, Callable, Optional

from .._futures import CheckedFuture, result_or_named_timeout, settle

__all__ = ["EventSubscription"]


class EventSubscription(CheckedFuture):
    """Settled with the handler's return value, or failed with ``JobFailed``,
    ``errors.TimeoutError`` (the emit's timeout), ``errors.ShutdownError`` (the
    provider stopped) or the error that kept the event from being enqueued.

    ``cancel()`` removes the event from its queue if it has not started (a
    delayed or waiting event) and then cancels the future; it returns False
    once a handler has taken the event, as ``Future.cancel`` does for a running call.
    """

    def __init__(self, event_name: str, event_id: str, correlation_id: str, job_id: str,
                 *, queue_name: Optional[str] = None,
                 canceller: Optional[Callable[["EventSubscription"], bool]] = None) -> None:
        super().__init__()
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

    # Settling from any thread, whoever comes first wins; later calls are no-ops.
    def _resolve(self, result: Any) -> None:
        settle(self, result)

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
