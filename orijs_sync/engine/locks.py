"""A worker's lock renewer, paced by the lock rather than by a generic back-off.

Healthy, it renews the locks of every active job (finishing ones included: their
outcome may still be retrying through an outage) every half of the worker's
``lock_renew_time`` (BullMQ's timer; by default half the lock duration: four renewals
per lock duration). With ``skip_lock_renewal`` it renews nothing.
After a failed renewal it retries every ``Worker.lock_retry_interval`` (a small
fraction of the lock), so the first renewal after Redis comes back lands at once.
A job whose lock is gone (another worker may own the job now) or could not be
renewed before it expired is reported once, as a ``LockLost`` ``error`` event (and,
when the renewal found it gone, in a ``lock_renewal_failed`` event with its id);
its outcome is then refused by the finishing script, never written over the claim
of another worker.

The numbers: with renewals every L/4 and retries every r, an outage of D seconds
costs the lock at most L/4 + D + r, under L for any outage shorter than L/2.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Set, Tuple, TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from .. import errors
from ..base.util import script_json
from ..job import Job

if TYPE_CHECKING:  # pragma: no cover
    from ..worker import Worker

log = logging.getLogger(__name__)

T = TypeVar("T")


def lock_retry_interval(lock_seconds: float) -> float:
    """How often a failed lock renewal (or finishing write) is retried: a fiftieth of
    the lock, between 0.05 and 0.5 seconds."""
    return min(max(lock_seconds / 50.0, 0.05), 0.5)


def write_through_blip(write: Callable[[], T], lock_seconds: float,
                       until: Optional[float] = None) -> T:
    """Run a job's outcome write, retrying through a Redis blip for up to one lock
    duration (``lock_seconds``), or until the monotonic ``until`` if that comes sooner,
    so that a finished job's outcome is not lost to a reconnect. Retries come at most
    ``lock_retry_interval`` apart (the write lands as soon as Redis is back) while the
    job's lock is kept; the last ``errors.ConnectionError`` is raised when the time has
    run out."""
    try:
        return write()
    except errors.ConnectionError:
        limit = lock_seconds if until is None else min(lock_seconds, until - time.monotonic())
        if limit <= 0:
            raise
    retrying = Retrying(retry=retry_if_exception_type(errors.ConnectionError),
                        wait=wait_exponential(multiplier=0.05,
                                              max=lock_retry_interval(lock_seconds)),
                        stop=stop_after_delay(limit), reraise=True)
    for attempt in retrying:
        with attempt:
            return write()
    raise AssertionError("unreachable")  # pragma: no cover


class LockRenewer:
    """Keeps the locks of one worker's active jobs; see the module docstring. Not a
    thread: the engine's renewer role sends ``call`` when it is due (many queues'
    in one pipeline) and hands the reply to ``done``."""

    def __init__(self, worker: "Worker") -> None:
        self.w = worker
        self.lock_seconds = worker.lock_duration_ms / 1000.0
        self.interval = worker.lock_renew_time / 2
        self._failing_since: Optional[float] = None
        self._reported: Set[Tuple[str, Optional[str]]] = set()   # (job id, token) told lost
        self._jobs: List[Job] = []          # those of the renewal in flight, and its time
        self._sent = 0.0

    def call(self) -> "Optional[Tuple[str, List[str], List[Any]]]":
        """The renewal to send now (script, keys, args), or None with no job to renew.
        Its reply goes to ``done`` (the engine's renewer sends many in one pipeline)."""
        w = self.w
        with w._cv:
            jobs = [] if w.skip_lock_renewal else list(w._active.values())
        self._reported &= {(job.id, job.token) for job in jobs}
        self._jobs, self._sent = jobs, time.monotonic()
        if not jobs:
            return None
        k = w.keys
        return ("extendLocks", [k.stalled],
                [k.base, script_json([j.id for j in jobs]), script_json([j.token for j in jobs]),
                 w.lock_duration_ms])

    def done(self, reply: Any) -> float:
        """The reply of ``call``'s renewal (the ids of the locks lost, or the error);
        returns the seconds until the next renewal is due."""
        if isinstance(reply, BaseException):
            self._failed(reply)
            self._report(self._expired())
            return self.w.lock_retry_interval
        lost = set(reply)
        for job in self._jobs:
            if job.id not in lost:
                job._lock_until = self._sent + self.lock_seconds
        self._report([job for job in self._jobs if job.id in lost], renewal_failed=True)
        if self._failing_since is not None:
            log.info("worker %s: locks renewed again after %.1fs of failures", self.w.name,
                     time.monotonic() - self._failing_since)
            self._failing_since = None
        return max(self.interval - (time.monotonic() - self._sent), 0.0)

    def _failed(self, exc: BaseException) -> None:
        """Log and publish the first failure of a run of them; the rest go to debug."""
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            log.warning("worker %s: lock renewal failed (%s); retrying every %.2fs",
                        self.w.name, exc, self.w.lock_retry_interval, exc_info=exc)
            self.w._emit("error", exc)
        else:
            log.debug("worker %s: lock renewal failed again: %s", self.w.name, exc)

    def _expired(self) -> List[Job]:
        """Jobs whose lock has run out while it could not be renewed."""
        now = time.monotonic()
        with self.w._cv:
            return [job for job in self.w._active.values() if job._lock_until <= now]

    def _report(self, jobs: List[Job], renewal_failed: bool = False) -> None:
        """``LockLost`` once per job still ours to run (a job being finished is reported
        by the finishing write itself, if its lock is gone by then); those a renewal
        found gone (``renewal_failed``) also in one ``lock_renewal_failed`` event."""
        w = self.w
        with w._cv:
            lost = [job for job in jobs if w._active.get(job.id) is job and not job._finishing
                    and (job.id, job.token) not in self._reported]
        if lost and renewal_failed:
            w._emit("lock_renewal_failed", [job.id for job in lost])
        for job in lost:
            self._reported.add((job.id, job.token))
            log.warning("worker %s lost the lock of job %s; its result will not be written",
                        w.name, job.id)
            w._emit("error", errors.LockLost(f"lock of job {job.id} lost; another worker "
                                             "may run it, its result will not be written"))
