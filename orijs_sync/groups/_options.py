"""Validation of the group queue's options: everything is checked before anything is
written, and every error is an ``OrijsError`` (``ValueError``/``TypeError`` as fits)."""
from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, Optional, Union, cast

from .. import errors
from ..base.util import Seconds, dumps, now_ms, to_seconds
from ..base.validate import MAX_INT, MAX_SECONDS, moment_ms
from ..job_scheduler import validate_pattern

ORDERING_METHODS = ("none", "scheduler", "in-memory")


class GroupOptionError(errors.InvalidArgument):
    """A bad option of a group queue call (nothing was written)."""


class GroupDataError(errors.InvalidArgumentType):
    """Job data that JSON cannot hold (nothing was written)."""


def group_id(value: Any) -> str:
    if value is None:
        raise GroupOptionError("group_id is required")
    if not isinstance(value, str):
        raise GroupOptionError(f"group_id must be a string, not {type(value).__name__}")
    if value == "" or value.strip() == "":
        raise GroupOptionError("group_id must not be empty")
    return value


def job_id(value: Any) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str) or value == "":
        raise GroupOptionError(f"job_id must be a non-empty string, not {value!r}")
    return value


def data_json(data: Any) -> str:
    try:
        return dumps(data, "job data")
    except TypeError as exc:
        raise GroupDataError(str(exc)) from exc


def positive_int(value: Any, name: str) -> int:
    return _integer(value, name, 1)


def count(value: Any, name: str) -> int:
    return _integer(value, name, 0)


def _integer(value: Any, name: str, minimum: int) -> int:
    """An int from ``minimum`` to 2**53 - 1: GroupMQ's numbers are JavaScript's, exact
    up to there (and Redis's scripts refuse larger counts, part-way through)."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_INT:
        raise GroupOptionError(f"{name} must be an integer from {minimum} to 2**53 - 1, not "
                               f"{value!r}")
    return value


def seconds(value: Optional[Seconds], name: str, *, positive: bool = False) -> Optional[float]:
    """A duration in seconds (number or ``timedelta``), ``None`` passing through."""
    try:
        result = to_seconds(value, name)
    except ValueError as exc:
        raise GroupOptionError(str(exc)) from exc
    if positive and result is not None and result <= 0:
        raise GroupOptionError(f"{name} must be > 0 seconds, got {value!r}")
    return result


def seconds_ms(value: Optional[Seconds], name: str, *, positive: bool = False) -> Optional[int]:
    """The same in milliseconds (what goes to Redis); a positive one is at least 1 ms."""
    result = seconds(value, name, positive=positive)
    if result is None:
        return None
    ms = int(round(result * 1000))
    return max(ms, 1) if positive else ms


def order_ms(value: Any) -> int:
    if value is None:
        return now_ms()
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise GroupOptionError(f"order_ms must be epoch milliseconds >= 0, not {value!r}")
    return int(value)


def delay_until(delay: Optional[Seconds], run_at: Any) -> int:
    """Epoch ms the job may run from (0 = now), from ``delay`` (seconds) or ``run_at``
    (a timezone-aware ``datetime`` or epoch seconds: ``validate.moment_ms``)."""
    if delay is not None and run_at is not None:
        raise GroupOptionError("give delay or run_at, not both")
    delay_ms = seconds_ms(delay, "delay")
    if delay_ms:
        return now_ms() + delay_ms
    if run_at is None:
        return 0
    try:
        return moment_ms(run_at, "run_at")
    except errors.ValidationError as exc:
        raise GroupOptionError(str(exc)) from exc


def repeat(value: Any) -> Dict[str, Union[int, str]]:
    """``{"every": seconds}`` or ``{"pattern": cron}`` -> GroupMQ's ``{"every": ms}`` /
    ``{"pattern": cron}``."""
    if not isinstance(value, dict) or len(value) != 1 or \
            next(iter(value)) not in ("every", "pattern"):
        raise GroupOptionError(f"repeat must be {{'every': seconds}} or {{'pattern': cron}}, "
                               f"not {value!r}")
    if "every" in value:
        every = value["every"]
        if isinstance(every, timedelta):
            every = every.total_seconds()
        ms = seconds_ms(every, "repeat every", positive=True)
        return {"every": int(ms or 0)}
    try:
        return {"pattern": validate_pattern(value["pattern"])}
    except ValueError as exc:
        raise GroupOptionError(f"repeat: {exc}") from exc


def ordering(method: Any, window: Optional[Seconds]) -> int:
    """The ordering window in ms (0 for method "none")."""
    if method not in ORDERING_METHODS:
        raise GroupOptionError(f"ordering must be one of {ORDERING_METHODS}, not {method!r}")
    window_ms = seconds_ms(window, "ordering_window", positive=True)
    if method == "none":
        if window_ms:
            raise GroupOptionError('ordering_window needs ordering "scheduler" or "in-memory"')
        return 0
    if window_ms is None:
        raise GroupOptionError(f'ordering "{method}" needs an ordering_window (seconds)')
    return window_ms


def in_memory(multiplier: Any, decay: Any, batch: Any) -> "tuple[float, float, int]":
    """The in-memory ordering's tuning: ``ordering_max_wait_multiplier`` (>= 1: the
    longest collection is this many windows), ``ordering_grace_period_decay`` (0 < d
    <= 1: each arrival shortens the next grace by this factor) and
    ``ordering_max_batch_size`` (>= 1: jobs of a group run per collection)."""
    for value, name in ((multiplier, "ordering_max_wait_multiplier"),
                        (decay, "ordering_grace_period_decay")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise GroupOptionError(f"{name} must be a number, not {value!r}")
    if multiplier < 1:
        raise GroupOptionError(f"ordering_max_wait_multiplier must be >= 1, not {multiplier!r}")
    if not 0 < decay <= 1:
        raise GroupOptionError(f"ordering_grace_period_decay must be in (0, 1], not {decay!r}")
    return float(multiplier), float(decay), positive_int(batch, "ordering_max_batch_size")


def default_backoff(attempt: int) -> float:
    """GroupMQ's default: 0.5 s doubled per attempt, at most 30 s (without its jitter,
    so retries are predictable)."""
    return min(30.0, 0.5 * 2.0 ** (attempt - 1))


def retry_delay_ms(seconds: Any) -> int:
    """A backoff function's seconds as a delay Redis can store: negative or nan is no
    delay; more than ten years (inf too) is ten years."""
    seconds = float(seconds)
    return int(min(seconds, MAX_SECONDS) * 1000) if seconds > 0 else 0


def backoff(value: Any) -> Callable[[int], float]:
    """``None`` (GroupMQ's exponential default), seconds (fixed), or a function of the
    attempt number (1 for the first retry) returning seconds."""
    if value is None:
        return default_backoff
    if callable(value):
        return cast(Callable[[int], float], value)
    fixed = seconds_ms(value, "backoff")
    return lambda attempt: (fixed or 0) / 1000.0
