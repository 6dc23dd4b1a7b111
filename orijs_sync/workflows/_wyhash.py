"""Wyhash in pure Python: what ``Bun.hash(text)`` computes, so Python derives the same
side keys as a TypeScript OriJS service (``{queuePrefix}:fr:{hash}`` and
``{queuePrefix}:workflow-failure:{hash}``).

The algorithm is the final version of wyhash (Wang Yi's wyhash.h, v4 with its default
secret), as the Zig standard library's ``std.hash.Wyhash`` implements it and Bun uses
it: 64-bit, here always with seed 0 over the text's UTF-8 bytes. Written from the
published description of the algorithm; checked against vectors produced by Bun.
"""
from __future__ import annotations

__all__ = ["wyhash", "bun_hash", "to_base36"]

_MASK = (1 << 64) - 1
_SECRET = (0xA0761D6478BD642F, 0xE7037ED1A0B428DB, 0x8EBC6AF09C88C6E3, 0x589965CC75374CC3)
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _mum(a: int, b: int) -> "tuple[int, int]":
    """The 128-bit product of two 64-bit words, as (low word, high word)."""
    product = a * b
    return product & _MASK, product >> 64


def _mix(a: int, b: int) -> int:
    low, high = _mum(a, b)
    return low ^ high


def _r8(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 8], "little")


def _r4(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 4], "little")


def _small(data: bytes) -> "tuple[int, int]":
    """The two words of an input of at most 16 bytes."""
    n = len(data)
    if n >= 4:
        quarter = (n >> 3) << 2
        a = (_r4(data, 0) << 32) | _r4(data, quarter)
        b = (_r4(data, n - 4) << 32) | _r4(data, n - 4 - quarter)
        return a, b
    if n > 0:
        return (data[0] << 16) | (data[n >> 1] << 8) | data[n - 1], 0
    return 0, 0


def _large(data: bytes, state: int) -> "tuple[int, int, int]":
    """The two last words and the state of an input of more than 16 bytes."""
    n, i = len(data), 0
    if n > 48:
        lanes = [state, state, state]
        while i + 48 < n:
            for lane in range(3):
                lanes[lane] = _mix(_r8(data, i + 16 * lane) ^ _SECRET[lane + 1],
                                   _r8(data, i + 16 * lane + 8) ^ lanes[lane])
            i += 48
        state = lanes[0] ^ lanes[1] ^ lanes[2]
    while i + 16 < n:
        state = _mix(_r8(data, i) ^ _SECRET[1], _r8(data, i + 8) ^ state)
        i += 16
    return _r8(data, n - 16), _r8(data, n - 8), state


def wyhash(data: bytes, seed: int = 0) -> int:
    """The 64-bit wyhash (final version) of ``data`` as an unsigned integer."""
    state = (seed ^ _mix(seed ^ _SECRET[0], _SECRET[1])) & _MASK
    if len(data) <= 16:
        a, b = _small(data)
    else:
        a, b, state = _large(data, state)
    a, b = _mum(a ^ _SECRET[1], b ^ state)
    return _mix(a ^ _SECRET[0] ^ len(data), b ^ _SECRET[1])


def to_base36(n: int) -> str:
    """``n.toString(36)`` for a non-negative integer: lowercase, no padding."""
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = _DIGITS[r] + out
        if not n:
            return out


def bun_hash(text: str) -> str:
    """``Bun.hash(text).toString(36)``: wyhash, seed 0, of the UTF-8 bytes, in base 36."""
    return to_base36(wyhash(text.encode("utf-8")))
