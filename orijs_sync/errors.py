"""One exception tree for the whole library.

Every error the library raises on its own derives from :class:`OrijsError`.
Where a builtin fits, the class also subclasses it, so ``except TimeoutError``
and ``except ConnectionError`` written against the standard library keep working.
"""
from __future__ import annotations

import builtins
from typing import Optional, Sequence


class OrijsError(Exception):
    """Base class of every error raised by orijs_sync."""


class ConnectionError(OrijsError, builtins.ConnectionError):  # noqa: A001 - deliberate shadow
    """Redis could not be reached; the message names the address."""


class PermissionDenied(OrijsError, builtins.PermissionError):
    """Redis refused a command to the connection's ACL user (NOPERM); the message names
    the address, the user and the command."""


class TimeoutError(OrijsError, builtins.TimeoutError):  # noqa: A001 - deliberate shadow
    """A wait ran past its timeout."""


class JobNotFound(OrijsError, LookupError):
    """The job does not exist (any more) in Redis."""


class LockLost(OrijsError):
    """The worker no longer owns the job's lock; its result was not written."""


class ScriptError(OrijsError):
    """A Lua script answered with an error code the caller did not expect."""

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code


class InvalidStateError(OrijsError):
    """The operation does not fit the job's or queue's current state."""


class JobFailed(OrijsError):
    """A job finished in the failed state; ``failed_reason`` is BullMQ's ``failedReason``."""

    def __init__(self, failed_reason: str, job_id: Optional[str] = None) -> None:
        super().__init__(failed_reason)
        self.failed_reason = failed_reason
        self.job_id = job_id


class ShutdownError(OrijsError):
    """The component was stopped while the operation was pending."""


class UnrecoverableError(Exception):
    """Raise from a handler to fail the job at once, whatever attempts are left."""


class RateLimitError(Exception):
    """Raised by ``Worker.rate_limit()`` inside a handler; the job goes back to wait."""


class DelayedError(Exception):
    """Raised after ``job.move_to_delayed()`` so the worker leaves the job where it is."""


class WaitingChildrenError(Exception):
    """Raised after ``job.move_to_waiting_children()`` moved the job."""


class RolledBackError(OrijsError):
    """A workflow failed; ``errors`` holds the primary error then the rollback errors."""

    def __init__(self, message: str, primary: BaseException,
                 rollback_errors: Sequence[BaseException] = ()) -> None:
        super().__init__(message)
        self.primary = primary
        self.rollback_errors = list(rollback_errors)


class CrossSlotError(OrijsError, ValueError):
    """Keys that must share one Redis Cluster hash slot would not (a queue, or a flow
    across queues, without a common hash tag)."""
