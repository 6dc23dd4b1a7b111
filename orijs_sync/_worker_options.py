"""A Worker's options about locks, starts and rate limits, checked (``Worker.__init__``
keeps them as attributes). Durations are seconds, as everywhere in the library."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from .base import validate as check
from .base.util import Seconds


def positive_ms(value: Seconds, arg: str) -> int:
    """A duration of at least 1 ms, in ms."""
    ms = int(check.seconds(value, arg, allow_none=False) * 1000)
    if ms < 1:
        check.bad_value(arg, value, "must be at least 1 ms")
    return ms


def limiter_option(limiter: Optional[Mapping[str, Any]]) -> Optional[Dict[str, int]]:
    """``{"max": n, "duration": seconds}`` as the scripts take it (duration in ms)."""
    if limiter is None:
        return None
    limiter = check.mapping(limiter, "limiter")
    check.known_keys(limiter, ("max", "duration"), "limiter")
    if "max" not in limiter or "duration" not in limiter:
        check.bad_value("limiter", limiter, "must be {'max': n, 'duration': seconds}")
    maximum = check.integer(limiter["max"], "limiter.max", minimum=1)
    return {"max": maximum, "duration": positive_ms(limiter["duration"], "limiter.duration")}


@dataclass(frozen=True)
class LockAndStartOptions:
    """``max_started_attempts``: a job taken more often than this fails at once with
    BullMQ's "job started more than allowable limit" (None or 0: no limit);
    ``skip_lock_renewal``: locks are never renewed (a job running past
    ``lock_duration`` stalls); ``lock_renew_time``: seconds (BullMQ's ``lockRenewTime``:
    locks are renewed every half of it; default half the lock duration);
    ``maximum_rate_limit_delay``: the longest a rate-limited worker waits before it
    looks again (seconds)."""

    max_started_attempts: Optional[int]
    skip_lock_renewal: bool
    lock_renew_time: float
    maximum_rate_limit_delay: float


def lock_and_start_options(lock_duration_ms: int, max_started_attempts: Optional[int],
                           skip_lock_renewal: bool, lock_renew_time: Optional[Seconds],
                           maximum_rate_limit_delay: Seconds) -> LockAndStartOptions:
    """The options checked. A ``lock_renew_time`` longer than the lock is refused: locks
    would expire between renewals and every job would stall."""
    if max_started_attempts is not None:
        check.integer(max_started_attempts, "max_started_attempts", minimum=0)
    check.boolean(skip_lock_renewal, "skip_lock_renewal")
    lock_seconds = lock_duration_ms / 1000.0
    if lock_renew_time is None:
        renew = lock_seconds / 2
    else:
        renew = positive_ms(lock_renew_time, "lock_renew_time") / 1000.0
        if renew > lock_seconds:
            check.bad_value("lock_renew_time", lock_renew_time,
                            f"must not exceed lock_duration ({lock_seconds:g} s): locks renewed "
                            f"every half of it would expire between renewals")
    delay = positive_ms(maximum_rate_limit_delay, "maximum_rate_limit_delay") / 1000.0
    return LockAndStartOptions(max_started_attempts, skip_lock_renewal, renew, delay)
