"""The group worker's GroupMQ options beyond its core ones (``name``, ``heartbeat``,
``on_error``, ``max_attempts``, ``stalled_grace_period``, ``enable_cleanup``,
``cleanup_interval``): validated together, before the worker exists, into one
``WorkerSettings``; and the ``on_error`` callback's call."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..base.util import Seconds
from . import _options as opt
from .job import GroupJob

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue

log = logging.getLogger(__name__)

OnError = Callable[[BaseException, Optional[GroupJob]], Any]
HEARTBEAT_CAP = 10.0           # seconds; GroupMQ's longest default heartbeat interval
DEFAULT_CLEANUP_INTERVAL = 60  # seconds; GroupMQ's cleanupIntervalMs default (60000)


@dataclass(frozen=True)
class WorkerSettings:
    """``name`` (metrics and logs), ``heartbeat`` (seconds between deadline
    extensions), ``on_error`` (or ``None``), ``max_attempts`` (a cap on every job's
    attempts, or ``None``: each job's own), ``stalled_grace_ms`` (how long past its
    deadline a job counts as stalled), ``cleanup_interval`` (seconds, ``None``: off)."""

    name: str
    heartbeat: float
    on_error: Optional[OnError]
    max_attempts: Optional[int]
    stalled_grace_ms: int
    cleanup_interval: Optional[float]

    def report(self, exc: BaseException, job: Optional[GroupJob] = None) -> None:
        """Call ``on_error(exc, job)``; an exception it raises is logged, never
        raised into the worker's threads."""
        if self.on_error is None:
            return
        try:
            self.on_error(exc, job)
        except Exception:  # noqa: BLE001 - a callback must not break the worker
            log.exception("group worker %s: on_error failed", self.name)


def _name(value: Any, queue: "GroupQueue") -> str:
    """The worker's name: a non-empty string, or the queue's name."""
    if value is None:
        return queue.name
    if not isinstance(value, str) or not value.strip():
        raise opt.GroupOptionError(f"name must be a non-empty string, not {value!r}")
    return value


def _heartbeat(value: Optional[Seconds], queue: "GroupQueue") -> float:
    """Seconds between heartbeats: > 0 and shorter than the job timeout (default: a
    third of it, at most ``HEARTBEAT_CAP``)."""
    timeout = queue.job_timeout_ms / 1000.0
    if value is None:
        return min(timeout / 3, HEARTBEAT_CAP)
    seconds = opt.seconds(value, "heartbeat", positive=True) or 0.0
    if seconds >= timeout:
        raise opt.GroupOptionError(
            f"heartbeat must be shorter than the queue's job_timeout ({timeout:g} s), not "
            f"{value!r}: a job would be recovered as stalled between two heartbeats")
    return seconds


def _cleanup(enable: Any, interval: Seconds) -> Optional[float]:
    """Seconds between cleanup passes, or ``None`` when cleanup is off."""
    if not isinstance(enable, bool):
        raise opt.GroupOptionError(f"enable_cleanup must be True or False, not {enable!r}")
    if interval is None:
        raise opt.GroupOptionError("cleanup_interval is required (seconds)")
    seconds = opt.seconds(interval, "cleanup_interval", positive=True)
    return seconds if enable else None


def settings(queue: "GroupQueue", *, name: Optional[str], heartbeat: Optional[Seconds],
             on_error: Optional[OnError], max_attempts: Optional[int],
             stalled_grace_period: Seconds, enable_cleanup: bool,
             cleanup_interval: Seconds) -> WorkerSettings:
    """Every option checked (a ``GroupOptionError`` naming the first bad one)."""
    if on_error is not None and not callable(on_error):
        raise opt.GroupOptionError("on_error must be callable (exc, job) or None")
    grace = opt.seconds_ms(stalled_grace_period, "stalled_grace_period")
    if grace is None or grace < 0:
        raise opt.GroupOptionError(f"stalled_grace_period must be >= 0 seconds, not "
                                   f"{stalled_grace_period!r}")
    return WorkerSettings(
        name=_name(name, queue), heartbeat=_heartbeat(heartbeat, queue), on_error=on_error,
        max_attempts=None if max_attempts is None
        else opt.positive_int(max_attempts, "max_attempts"),
        stalled_grace_ms=grace, cleanup_interval=_cleanup(enable_cleanup, cleanup_interval))
