"""One exception tree for the whole library.

Every error the library raises on its own derives from ``OrijsError``.
Where a builtin fits, the class also subclasses it, so ``except TimeoutError``
and ``except ConnectionError`` written against the standard library keep working.
"""
from __future__ import annotations

import builtins
from typing import Any, Optional, Sequence


class OrijsError(Exception):
    """Base class of every error raised by orijs_sync."""


class ConnectionError(OrijsError, builtins.ConnectionError):  # noqa: A001 - deliberate shadow
    """Redis could not be reached; the message names the address."""


class RedisError(OrijsError):
    """Redis answered with an error (WRONGTYPE, NOPERM, OOM, a script's error...) or
    redis-py refused the command; the original redis-py exception is ``__cause__``."""


class PermissionDenied(RedisError, builtins.PermissionError):
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


class ValidationError(OrijsError):
    """A public call was given a bad argument; nothing was written. ``argument`` names
    it (``"opts.backoff.delay"``...) and ``value`` is what was given."""

    def __init__(self, message: str, argument: Optional[str] = None, value: Any = None) -> None:
        super().__init__(message)
        self.argument = argument
        self.value = value


class InvalidArgument(ValidationError, ValueError):
    """An argument of the right type with a value the call cannot take."""


class InvalidArgumentType(ValidationError, TypeError):
    """An argument of the wrong type."""


class UnknownOption(InvalidArgument):
    """An option key the call does not know (usually a typo); ``valid`` lists the known ones."""

    def __init__(self, message: str, argument: Optional[str] = None, value: Any = None,
                 valid: Sequence[str] = ()) -> None:
        super().__init__(message, argument, value)
        self.valid = list(valid)


class CorruptJob(OrijsError, ValueError):
    """A job hash in Redis that cannot be decoded (written by hand, another language, an
    old version); ``field`` names the first bad field."""

    def __init__(self, message: str, job_id: Optional[str] = None,
                 field: Optional[str] = None) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.field = field


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
    """Raise it from a handler after calling ``worker.rate_limit(seconds)``: the job goes
    back to wait with no attempt counted. The library never raises it itself."""


class DelayedError(Exception):
    """Raised after ``job.move_to_delayed()`` so the worker leaves the job where it is."""


class WaitingChildrenError(Exception):
    """Raised after ``job.move_to_waiting_children()`` moved the job."""


class JobCancelled(OrijsError):
    """Raised by ``job.cancellation.raise_if_set()`` once ``Worker.cancel_job`` cancelled
    the job: a handler error like any other (the attempt fails, retried while attempts
    are left). ``reason`` is the reason given to the cancel, or None."""

    def __init__(self, reason: Optional[str] = None) -> None:
        super().__init__(reason or "the job was cancelled")
        self.reason = reason


class ChildError(OrijsError):
    """In process mode, a handler's exception that could not come back from its child
    process as itself (it does not pickle): ``type_name`` names its class; ``str()`` is
    its message; ``child_traceback``, as on any exception from a child, its traceback."""

    def __init__(self, message: str, type_name: str) -> None:
        super().__init__(message)
        self.type_name = type_name


class ChildDied(OrijsError):
    """In process mode, the child process running a job died (a crash, ``os._exit``, a
    kill, out of memory): the job fails with BullMQ's wording for a sandboxed processor,
    ``Unexpected exit code: <code> signal: <signal>``; the child is replaced."""


class JobTimedOut(OrijsError):
    """In process mode, a job ran past the worker's ``job_timeout``: its child process
    was killed, the attempt fails (retried per ``attempts``); the child is replaced."""


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
