"""Small shared helpers: time, durations, JSON that refuses what it cannot hold."""
from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any, Optional, Union

Seconds = Union[int, float, timedelta]


def now_ms() -> int:
    return int(time.time() * 1000)


def to_seconds(value: Optional[Seconds], name: str, *, allow_none: bool = True) -> Optional[float]:
    """A duration in seconds from a number or ``timedelta``; negative values are refused."""
    if value is None:
        if allow_none:
            return None
        raise ValueError(f"{name} is required")
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number of seconds or a timedelta, not {value!r}")
    if value != value or value < 0:  # NaN or negative
        raise ValueError(f"{name} must be >= 0 seconds, got {value!r}")
    return float(value)


def to_ms(value: Optional[Seconds], name: str) -> Optional[int]:
    seconds = to_seconds(value, name)
    return None if seconds is None else int(round(seconds * 1000))


def dumps(value: Any, what: str = "value") -> str:
    """Compact JSON as BullMQ writes it; a value JSON can't hold raises ``TypeError``."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} cannot be stored as JSON: {exc}") from exc


def loads(text: Optional[str], default: Any = None) -> Any:
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except ValueError:
        return text
