"""Helpers shared by the cluster tests."""
from __future__ import annotations

from redis.cluster import key_slot


def slot_of(prefix: str, name: str) -> int:
    """The hash slot of every key of queue ``name`` under ``prefix``."""
    return key_slot(f"{prefix}:{name}:wait".encode())
