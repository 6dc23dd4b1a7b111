"""Strategies of bad values and the keyspace snapshot shared by the bad-input property
suites (test_bad_input_properties.py, test_bad_input_api.py)."""
from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, Callable, List, NamedTuple

import pytest
import redis
from hypothesis import strategies as st

from orijs_sync import errors
from orijs_sync.base.validate import MAX_SECONDS

# A digest of every key and its value, computed in Redis (one round trip).
SNAPSHOT = """
local keys = redis.call('KEYS', '*')
table.sort(keys)
local parts = {}
for _, k in ipairs(keys) do
  parts[#parts + 1] = k .. '=' .. redis.sha1hex(redis.call('DUMP', k))
end
return {#keys, redis.sha1hex(table.concat(parts, '|'))}
"""

# -- strategies -----------------------------------------------------------------------
junk = st.one_of(st.integers(), st.floats(allow_nan=True), st.booleans(), st.binary(max_size=4),
                 st.lists(st.text(max_size=3), max_size=2),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                 st.builds(object), st.complex_numbers(allow_nan=False, max_magnitude=5))
bad_names = st.one_of(st.none(), junk, st.just(""), st.text(" \t\n", min_size=1, max_size=3),
                      st.builds(lambda a, b: f"{a}:{b}", st.text(max_size=6), st.text(max_size=6)))
bad_seconds = st.one_of(
    st.floats(max_value=-1e-6), st.just(math.inf), st.just(-math.inf), st.just(math.nan),
    st.floats(min_value=MAX_SECONDS * 1.01, allow_infinity=True), st.just(1e12),
    st.integers(min_value=int(MAX_SECONDS) + 1), st.integers(max_value=-1),
    st.integers(min_value=10 ** 400, max_value=10 ** 401),
    st.text(max_size=4), st.booleans(), st.lists(st.integers(), max_size=2),
    st.builds(lambda d: timedelta(days=d), st.integers(min_value=-10 ** 5, max_value=-1)))
bad_mappings = st.one_of(st.lists(st.text(min_size=2, max_size=2), min_size=1, max_size=3),
                         st.text(min_size=1, max_size=4), st.integers(), st.floats(),
                         st.tuples(st.text(max_size=1), st.text(max_size=1)), st.booleans())
not_callable = st.one_of(st.none(), st.integers(), st.text(max_size=4), st.lists(st.none()))
not_json = st.one_of(st.builds(object), st.sets(st.integers(), min_size=1, max_size=2),
                     st.just(math.nan), st.just(math.inf), st.binary(min_size=1, max_size=3),
                     st.builds(lambda x: {"k": x}, st.builds(object)),
                     st.builds(lambda k: {k: 1}, st.tuples(st.integers())))


def bad_ints(minimum: int, maximum: int = 2 ** 53 - 1) -> st.SearchStrategy[Any]:
    return st.one_of(st.integers(max_value=minimum - 1), st.integers(min_value=maximum + 1),
                     st.floats(), st.booleans(), st.text(max_size=3), st.lists(st.integers()),
                     st.none() if minimum > 0 else st.just(minimum - 1))


def bad_bools() -> st.SearchStrategy[Any]:
    return st.one_of(st.integers(), st.text(max_size=3), st.floats(), st.lists(st.none()))


def _mutate(key: str, i: int, ch: str) -> str:
    pos = (i // 3) % (len(key) + 1)
    kind = i % 3
    if kind == 0 and key:
        pos = min(pos, len(key) - 1)
        return key[:pos] + key[pos + 1:]
    if kind == 1:
        return key[:pos] + ch + key[pos:]
    pos = min(pos, len(key) - 1)
    return key[:pos] + ch + key[pos + 1:]


def typos(valid: Any) -> st.SearchStrategy[str]:
    """A one-letter slip of a valid key (that is not itself valid)."""
    return st.builds(_mutate, st.sampled_from(sorted(valid)), st.integers(0, 200),
                     st.sampled_from("abcdefghijklmnopqrstuvwxyz_")).filter(
        lambda k: k not in valid and k != "")


def snapshot(r: redis.Redis) -> List[Any]:
    """The number of keys and a digest of every key and value (equal: nothing written)."""
    return r.eval(SNAPSHOT, 0)


def assert_refused_by_name(r: redis.Redis, call: Callable[[], Any], arg: str) -> None:
    """``call()`` raises a ValidationError (a TypeError or ValueError too) naming ``arg``
    and leaves Redis as it was."""
    before = snapshot(r)
    with pytest.raises(errors.ValidationError) as info:
        call()
    exc = info.value
    assert isinstance(exc, (TypeError, ValueError)), repr(exc)
    assert arg in str(exc), f"{exc!r} does not name {arg!r}"
    assert snapshot(r) == before, "a refused call wrote to Redis"


class Case(NamedTuple):
    """One bad-input case: values to draw, the call given the test's world and a value,
    and the argument its message must name (from the value)."""
    strategy: st.SearchStrategy[Any]
    call: Callable[[Any, Any], Any]
    arg: Callable[[Any], str]


def const(name: str) -> Callable[[Any], str]:
    return lambda _value: name
