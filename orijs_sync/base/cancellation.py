"""A running job's cancellation: what BullMQ's ``AbortSignal`` is to a Node processor.

``Worker.cancel_job`` sets it; the handler checks it (``is_set()``), sleeps on it
(``wait(timeout)``, woken at once by a cancellation) or stops by raising
(``raise_if_set()``). Threads cannot be interrupted: cancellation is cooperative, a
handler that never looks runs to its end and its outcome is written as usual.
"""
from __future__ import annotations

import threading
from typing import Optional

from .. import errors


class Cancellation:
    """Set once, by another thread; read by the handler. Thread-safe (one Event and the
    reason, written before the Event is set)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: Optional[str] = None

    def set(self, reason: Optional[str] = None) -> None:
        """Cancel; the first reason given is kept (later calls change nothing)."""
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    def is_set(self) -> bool:
        """True once the job was cancelled (BullMQ's ``signal.aborted``)."""
        return self._event.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the job is cancelled or ``timeout`` seconds pass; returns
        ``is_set()``. A handler's sleep that a cancellation cuts short."""
        return self._event.wait(timeout)

    @property
    def reason(self) -> Optional[str]:
        """The reason given to ``cancel_job`` / ``cancel_all_jobs`` (BullMQ's
        ``signal.reason``), or None."""
        return self._reason if self._event.is_set() else None

    def raise_if_set(self) -> None:
        """Raise ``errors.JobCancelled`` (its message the reason) once cancelled:
        the attempt then fails as any handler error does (retried while attempts are
        left; raise ``errors.UnrecoverableError`` instead to fail the job for good).
        BullMQ's ``signal.throwIfAborted()``."""
        if self._event.is_set():
            raise errors.JobCancelled(self._reason)
