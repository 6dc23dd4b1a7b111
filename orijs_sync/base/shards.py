"""Dealing many keys out over a few blocking connections (threads)."""
from __future__ import annotations


def deal(count: int, size: int, most: int) -> int:
    """The shard of the ``count``-th key added (from 0): ``size`` keys per shard until
    there are ``most`` shards, then round-robin over them."""
    if count < size * most:
        return count // size
    return count % most
