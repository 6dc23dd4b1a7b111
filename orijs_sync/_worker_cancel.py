"""Cancelling a Worker's running jobs (BullMQ's ``worker.cancelJob`` /
``cancelAllJobs``): each running job's ``job.cancellation`` is set, with the reason.

Threads cannot be interrupted, so cancellation is cooperative, as BullMQ's
``AbortSignal`` is: the handler checks ``job.cancellation`` (or sleeps on it) and
decides. The job's outcome is then what the handler does, as in BullMQ: it raises, and
the attempt fails like any failure (retried while attempts are left; an
``errors.UnrecoverableError`` fails it for good), or it returns, and the job completes.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from . import errors
from .base import validate as check

if TYPE_CHECKING:  # pragma: no cover
    from .job import Job


class CancelMixin:
    """What a Worker needs to cancel its jobs (attributes set by ``Worker.__init__``)."""

    name: str
    process_options: Any
    _cv: threading.Condition
    _active: Dict[str, "Job"]

    def cancel_job(self, job_id: str, reason: Optional[str] = None) -> bool:
        """Cancel the job ``job_id`` this worker's handler runs (or is about to run): its
        ``job.cancellation`` is set, with ``reason``. Returns False when no handler of
        this worker runs it (never taken here, its handler returned, or taken manually
        with ``get_next_job``). Nothing is
        written to Redis: the handler decides the outcome (see the module docstring)."""
        job_id = check.job_id(job_id)
        reason = check.optional_string(reason, "reason")
        self._check_cancellable("cancel_job")
        with self._cv:
            job = self._active.get(job_id)
        if job is None or job._handler_done:
            return False
        job.cancellation.set(reason)
        return True

    def cancel_all_jobs(self, reason: Optional[str] = None) -> List[str]:
        """Cancel every job this worker's handlers run (see ``cancel_job``); returns
        their ids."""
        reason = check.optional_string(reason, "reason")
        self._check_cancellable("cancel_all_jobs")
        with self._cv:
            jobs = [job for job in self._active.values() if not job._handler_done]
        for job in jobs:
            job.cancellation.set(reason)
        return [job.id for job in jobs]

    def _check_cancellable(self, action: str) -> None:
        if self.process_options is not None:
            raise errors.InvalidStateError(
                f"{action}(): worker {self.name!r} runs its handlers in child processes "
                f"(processes=N), which do not see a cancellation; not implemented there "
                f"(job_timeout stops a job that runs too long)")
