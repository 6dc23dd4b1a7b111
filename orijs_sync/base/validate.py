"""Argument checks shared by every public entry point.

Each helper returns the checked (and normalised) value or raises an
``errors.InvalidArgument`` / ``errors.InvalidArgumentType`` whose message
names the argument and the value given. Calls check everything first and write
afterwards, so a refused call leaves Redis unchanged.
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from typing import Any, Dict, Literal, NoReturn, Optional, cast, overload

from .. import errors

# Longest duration taken anywhere (delay, timeout, interval...): ten years. Beyond it
# a delayed job's score would lose precision and a timer wait would overflow.
MAX_SECONDS = 10 * 365 * 24 * 3600.0
# BullMQ's highest priority (2 ** 21 - 1).
MAX_PRIORITY = 2 ** 21 - 1
MAX_INT = 2 ** 53 - 1   # what a JSON number keeps exactly (Lua and JavaScript read doubles)

# Replies are text; bytes another program wrote that are not UTF-8 decode to lone
# surrogates and encode back to the same bytes, so one such field fails its job with
# a reason (or reads as it is) instead of every reply that carries it raising, and
# nothing is rewritten differently.
DECODING_ERRORS = "surrogateescape"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def bad_value(arg: str, value: Any, why: str) -> NoReturn:
    raise errors.InvalidArgument(f"{arg} {why}, got {_show(value)}", arg, value)


def bad_type(arg: str, value: Any, expected: str) -> NoReturn:
    raise errors.InvalidArgumentType(
        f"{arg} must be {expected}, not {type(value).__name__} ({_show(value)})", arg, value)


def storable(text: str, arg: str) -> str:
    """``text``, refused when Redis cannot store it: it holds a lone surrogate (half of a
    UTF-16 pair) other than one standing for a byte that is not UTF-8 (text read from
    Redis, written back as those bytes: connection.DECODING_ERRORS)."""
    if not text.isascii():
        try:
            text.encode("utf-8", DECODING_ERRORS)
        except UnicodeEncodeError as exc:
            bad_value(arg, text, f"holds a lone surrogate ({text[exc.start]!r}, half of a "
                                 "UTF-16 pair), which UTF-8 cannot store")
    return text


def name(value: Any, arg: str) -> str:
    """A queue/worker/event/workflow name: a non-empty string without ``:``."""
    if not isinstance(value, str):
        bad_type(arg, value, "a string")
    if not value.strip():
        bad_value(arg, value, "must be a non-empty string")
    if ":" in value:
        bad_value(arg, value, "must not contain ':' (it is BullMQ's key separator)")
    return storable(value, arg)


def string(value: Any, arg: str, *, non_empty: bool = True) -> str:
    if not isinstance(value, str):
        bad_type(arg, value, "a string")
    if non_empty and not value:
        bad_value(arg, value, "must not be empty")
    return storable(value, arg)


def optional_string(value: Any, arg: str) -> Optional[str]:
    return None if value is None else string(value, arg)


def boolean(value: Any, arg: str) -> bool:
    if not isinstance(value, bool):
        bad_type(arg, value, "True or False")
    return value


def function(value: Any, arg: str, *, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if not callable(value):
        bad_type(arg, value, "callable")
    return value


def integer(value: Any, arg: str, *, minimum: Optional[int] = None,
            maximum: Optional[int] = MAX_INT) -> int:
    """An ``int`` (never a bool) within ``minimum``..``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        bad_type(arg, value, "an integer")
    return cast(int, _within(value, arg, minimum, maximum))


def _within(value: Any, arg: str, minimum: Optional[float], maximum: Optional[float]) -> Any:
    if minimum is not None and value < minimum:
        bad_value(arg, value, f"must be >= {minimum}")
    if maximum is not None and value > maximum:
        bad_value(arg, value, f"must be <= {maximum}")
    return value


def number(value: Any, arg: str, *, minimum: Optional[float] = None,
           maximum: Optional[float] = None) -> float:
    """A finite int or float (never a bool, inf or nan) within the bounds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        bad_type(arg, value, "a number")
    try:
        finite = math.isfinite(value)
    except OverflowError:   # an int too large for a float
        finite = False
    if not finite:
        bad_value(arg, value, "must be a finite number")
    return cast(float, _within(value, arg, minimum, maximum))


@overload
def seconds(value: Any, arg: str, *, allow_none: Literal[False],
            maximum: float = MAX_SECONDS) -> float: ...


@overload
def seconds(value: Any, arg: str, *, allow_none: bool = True,
            maximum: float = MAX_SECONDS) -> Optional[float]: ...


def seconds(value: Any, arg: str, *, allow_none: bool = True,
            maximum: float = MAX_SECONDS) -> Optional[float]:
    """A duration in seconds (number or ``timedelta``): finite, >= 0, at most ten years."""
    if value is None:
        if allow_none:
            return None
        bad_type(arg, value, "a number of seconds or a timedelta")
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        bad_type(arg, value, "a number of seconds or a timedelta")
    return float(number(value, arg, minimum=0, maximum=maximum))


def moment_ms(value: Any, arg: str) -> int:
    """A point in time as epoch milliseconds (>= 0): a timezone-aware ``datetime`` or
    epoch seconds (as ``time.time()``). A naive ``datetime`` is refused: which zone it
    means is a guess."""
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            bad_value(arg, value, "must be a timezone-aware datetime (a naive one is "
                                  "ambiguous: use datetime.now(timezone.utc) + ... or "
                                  ".astimezone())")
        return max(0, int(round(value.timestamp() * 1000)))    # before 1970: now
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        bad_type(arg, value, "a timezone-aware datetime or epoch seconds")
    return int(round(number(value, arg, minimum=0, maximum=MAX_INT / 1000) * 1000))


def mapping(value: Any, arg: str, *, allow_none: bool = True) -> Dict[str, Any]:
    """A ``Mapping`` (never iterated as pairs: a list is refused); ``None`` is ``{}``."""
    if value is None and allow_none:
        return {}
    if not isinstance(value, Mapping):
        bad_type(arg, value, "a dict")
    return dict(value)


def known_keys(value: Mapping[str, Any], valid: Collection[str], arg: str) -> None:
    """Refuse keys outside ``valid``, naming the first unknown one, listing the valid
    ones and suggesting the closest ("did you mean")."""
    for key in value:
        if key in valid:
            continue
        if not isinstance(key, str):
            bad_type(f"{arg} key", key, "a string")
        close = difflib.get_close_matches(key, list(valid), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise errors.UnknownOption(
            f"{arg} has an unknown key {key!r}{hint} (valid keys: "
            f"{', '.join(sorted(valid))})", f"{arg}.{key}", key, sorted(valid))


def one_of(value: Any, choices: Collection[str], arg: str, what: str = "value") -> str:
    if not isinstance(value, str):
        bad_type(arg, value, f"one of {', '.join(sorted(choices))}")
    if value not in choices:
        close = difflib.get_close_matches(value, list(choices), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise errors.InvalidArgument(
            f"{arg}: unknown {what} {_show(value)}; one of {', '.join(sorted(choices))}{hint}",
            arg, value)
    return value


def job_id(value: Any, arg: str = "job_id") -> str:
    """An id naming a stored job: a non-empty string (or an int, as BullMQ's own ids)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return string(value, arg)


def states(value: Any, arg: str, valid: Collection[str]) -> "list[str]":
    """One state name or a sequence of them, each one of ``valid``."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Mapping) or not isinstance(value, (list, tuple, set, frozenset)):
        bad_type(arg, value, "a state name or a list of state names")
    return [one_of(s, valid, arg, "job state") for s in value]
