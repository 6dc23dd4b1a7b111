"""Small shared helpers: time, durations, JSON that refuses what it cannot hold."""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Optional, Union, overload

from .. import errors
from . import validate

Seconds = Union[int, float, timedelta]


def now_ms() -> int:
    return int(time.time() * 1000)


def utc_datetime(ms: Optional[int]) -> Optional[datetime]:
    """Epoch milliseconds (a stored time) as an aware UTC ``datetime``; None stays None."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000.0, timezone.utc)


class StoredTimes:
    """The times a job's hash holds, as aware UTC ``datetime``s beside the stored epoch
    milliseconds (``timestamp``, ``processed_on``, ``finished_on``), which stay as
    BullMQ names and stores them."""

    timestamp: int
    processed_on: Optional[int]
    finished_on: Optional[int]

    @property
    def created_at(self) -> datetime:
        """When the job was added (``timestamp``), UTC."""
        return datetime.fromtimestamp(self.timestamp / 1000.0, timezone.utc)

    @property
    def processed_at(self) -> Optional[datetime]:
        """When its latest attempt started (``processed_on``), UTC; None before."""
        return utc_datetime(self.processed_on)

    @property
    def finished_at(self) -> Optional[datetime]:
        """When it completed or failed for good (``finished_on``), UTC; None before."""
        return utc_datetime(self.finished_on)


def to_seconds(value: Optional[Seconds], name: str, *, allow_none: bool = True) -> Optional[float]:
    """A duration in seconds from a number or ``timedelta``: finite, >= 0, at most
    ten years (``validate.seconds``)."""
    return validate.seconds(value, name, allow_none=allow_none)


def to_ms(value: Optional[Seconds], name: str, *, allow_none: bool = True) -> Optional[int]:
    seconds = to_seconds(value, name, allow_none=allow_none)
    return None if seconds is None else int(round(seconds * 1000))


# One encoder for every call (json.dumps with options builds a new one each time).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# A lone surrogate: half of a UTF-16 pair (text JavaScript cut mid-character, which
# JSON.parse and json.loads both read). UTF-8 cannot encode it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _encode(value: Any, what: str, argument: bool) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        message = f"{what} cannot be stored as JSON: {exc}"
        if not argument:
            raise TypeError(message) from exc
        raise errors.InvalidArgumentType(message, what, value) from exc


def _escape(match: "re.Match[str]") -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps(value: Any, what: str = "value", *, argument: bool = True) -> str:
    """A value (job data, a return value, progress, an event's payload...) as compact JSON,
    as Node's ``JSON.stringify`` writes it: a lone surrogate as its ``\\uXXXX`` escape,
    so it is stored and reads back equal on both sides. A value JSON can't hold raises
    ``errors.InvalidArgumentType`` naming ``what`` (a plain ``TypeError`` when the value
    is not an argument but a result, e.g. what a step returned)."""
    text = _encode(value, what, argument)
    return text if text.isascii() else _LONE_SURROGATE.sub(_escape, text)


def script_json(value: Any, what: str = "value") -> str:
    """Options, ids and fields as compact JSON for a script, whose cjson refuses a lone
    surrogate's escape: text decoded from bytes that are not UTF-8 stays as it is (it is
    sent back as those bytes, see connection.DECODING_ERRORS); other lone surrogates
    cannot be stored and raise ``errors.InvalidArgument`` naming ``what``."""
    text = _encode(value, what, True)
    return text if text.isascii() else validate.storable(text, what)


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, as Node's UTF-8 encoding
    stores it: for text written as it is (a failedReason), never refused."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


@overload
def stored_int(value: Any, default: int) -> int: ...
@overload
def stored_int(value: Any, default: None = None) -> Optional[int]: ...
def stored_int(value: Any, default: Optional[int] = None) -> Optional[int]:
    """A number field of a hash (written by anyone) as an int: integer text exactly,
    other number text truncated; what is no number ("abc", "nan", "1e400") or missing
    is ``default``."""
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        pass
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        return default


def loads(text: Optional[str], default: Any = None) -> Any:
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except ValueError:
        return text


def run_logged(logger: logging.Logger, fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` on a pool thread, logging what it raises (a pool would keep the
    exception in a future nobody reads): one bad item never goes unnoticed."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - logged; the pool thread goes on with the next item
        logger.exception("%r failed on a background thread", fn)
        return None


class Counter:
    """Hands out increasing numbers to many threads (the suffixes of lock tokens)."""

    def __init__(self, start: int = 1) -> None:
        self._lock = threading.Lock()      # guards _next
        self._next = start

    def take(self, count: int = 1) -> int:
        """Reserve ``count`` numbers; returns the first of them."""
        with self._lock:
            first = self._next
            self._next += count
        return first
