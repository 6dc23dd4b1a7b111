"""A job's calls for manual processing (BullMQ's "manually processing jobs") and its
cancellation: the job holds a lock with a token of the caller's, and moves itself.

``move_to_completed`` and ``move_to_failed`` need the Worker that took the job
(``Worker.get_next_job``, or a handler's job): its lock duration, backoff strategies,
``remove_on_*`` and metrics options apply, as they do to its handlers' outcomes.
"""
from __future__ import annotations

import threading
from typing import Any, Optional

from . import errors
from .base import validate as check
from .base.cancellation import Cancellation
from .base.util import Seconds, script_json

_CANCEL_LOCK = threading.Lock()      # guards the lazy creation of a job's Cancellation


class ManualJobMixin:
    """Mixed into ``orijs_sync.job.Job``."""

    id: str
    queue: Any
    token: Optional[str]
    _worker: Any
    _moved: bool
    _discarded: bool
    _cancel: Optional[Cancellation]

    @property
    def cancellation(self) -> Cancellation:
        """Set once ``Worker.cancel_job`` (or ``cancel_all_jobs``) cancels this running
        job: ``is_set()``, ``wait(timeout)``, ``reason``, ``raise_if_set()``. BullMQ's
        ``AbortSignal``. Cooperative: nothing stops the handler's thread; the handler
        looks and decides (raise to fail the attempt, or return to complete it)."""
        cancel = self._cancel
        if cancel is None:
            with _CANCEL_LOCK:
                if self._cancel is None:
                    self._cancel = Cancellation()
                cancel = self._cancel
        return cancel

    def discard(self) -> None:
        """Mark the job so that a failure of this attempt is not retried, whatever
        attempts are left (BullMQ's deprecated ``job.discard()``; raising
        ``errors.UnrecoverableError`` does the same)."""
        self._discarded = True

    def extend_lock(self, token: str, duration: Seconds) -> bool:
        """Renew the job's lock, held with ``token``, for ``duration`` seconds from now
        (BullMQ's ``job.extendLock``). False when the lock is gone or another token holds
        it. A manually taken job's lock is renewed only by this call."""
        check.string(token, "token")
        ms = int(check.seconds(duration, "duration", allow_none=False) * 1000)
        if ms < 1:
            check.bad_value("duration", duration, "must be at least 1 ms")
        k = self.queue.keys
        lost = self.queue.scripts.run(
            "extendLocks", [k.stalled], [k.base, script_json([self.id]), script_json([token]), ms])
        return not lost

    def move_to_wait(self, token: str) -> float:
        """Put the active job, locked with ``token``, back in wait (ahead of the jobs of
        its priority) without counting an attempt (BullMQ's ``job.moveToWait``). Returns
        the seconds left of the queue's rate limit (0.0 when not limited)."""
        check.string(token, "token")
        k = self.queue.keys
        code = self.queue.scripts.run("moveJobFromActiveToWait",
                                      [k.job(self.id), k.active, k.stalled, k.limiter],
                                      [k.base, self.id, token])
        raise_for_code(self.id, code, "move to wait")
        self._moved = True
        return float(code) / 1000.0

    def move_to_completed(self, return_value: Any, token: str,
                          fetch_next: bool = False) -> Optional[Any]:
        """Complete the active job locked with ``token``: its ``returnvalue`` stored, its
        lock released, a ``completed`` event written (BullMQ's ``job.moveToCompleted``).
        With ``fetch_next``, the same call takes the next job, locked with ``token``, and
        returns it (None when there is none). ``errors.LockLost`` when the lock is gone or
        another token holds it; nothing is written then."""
        check.string(token, "token")
        check.boolean(fetch_next, "fetch_next")
        return self._manual_worker("move_to_completed")._finish_manually(
            self, "completed", return_value, token, fetch_next)

    def move_to_failed(self, error: BaseException, token: str,
                       fetch_next: bool = False) -> Optional[Any]:
        """Fail this attempt of the active job locked with ``token``, as a worker fails a
        handler's exception (BullMQ's ``job.moveToFailed``): retried (to wait, or delayed
        by its backoff) while attempts are left, unless ``error`` is an
        ``errors.UnrecoverableError`` or the job was ``discard()``-ed; else failed for
        good. With ``fetch_next``, the next job is taken (locked with ``token``) and
        returned, or None."""
        if not isinstance(error, BaseException):
            check.bad_type("error", error, "an exception")
        check.string(token, "token")
        check.boolean(fetch_next, "fetch_next")
        return self._manual_worker("move_to_failed")._finish_manually(
            self, "failed", error, token, fetch_next)

    def _manual_worker(self, action: str) -> Any:
        if self._worker is None:
            raise errors.InvalidStateError(
                f"{action}() is for a job taken by a Worker (Worker.get_next_job, or a "
                f"handler's job); job {self.id} was read by a Queue")
        return self._worker


_CODES = {-1: "it does not exist", -2: "its lock is gone (expired, or never taken)",
          -3: "it is not active", -4: "it has pending children", -6: "its lock is held by "
          "another token", -9: "a child of it failed"}


def raise_for_code(job_id: str, code: Any, action: str) -> None:
    """BullMQ's errors for a move of an active job refused by its script (a negative
    code): ``JobNotFound``, ``LockLost`` (-2, -6) or ``InvalidStateError``."""
    if not isinstance(code, int) or code >= 0:
        return
    why = _CODES.get(code, f"error {code}")
    message = f"cannot {action} job {job_id}: {why}"
    if code == -1:
        raise errors.JobNotFound(message)
    if code in (-2, -6):
        raise errors.LockLost(message)
    raise errors.InvalidStateError(message)
