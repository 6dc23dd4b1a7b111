"""Bounded SCAN for the dashboard's pages: never more than ``scan_limit`` keys looked at."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Set, Tuple

SCAN_LIMIT = 20_000
SCAN_COUNT = 1_000


def scan_names(client: Any, match: str, name_of: Callable[[str], Optional[str]], *,
               scan_limit: int = SCAN_LIMIT) -> Tuple[List[str], bool]:
    """The sorted distinct ``name_of(key)`` (``None`` skipped) of the keys matching
    ``match``, and whether the scan stopped at ``scan_limit`` keys (more may exist)."""
    names: Set[str] = set()
    looked, cursor = 0, 0
    while True:
        cursor, keys = client.scan(cursor, match=match, count=SCAN_COUNT)
        looked += len(keys)
        names.update(n for n in map(name_of, keys) if n)
        if not cursor:
            return sorted(names), False
        if looked >= scan_limit:
            return sorted(names), True


def bullmq_queues(client: Any, prefix: str, head: str = "",
                  suffixes: Tuple[str, ...] = ("meta", "id", "events"), *,
                  scan_limit: int = SCAN_LIMIT) -> Tuple[List[str], bool]:
    """The BullMQ queues named ``{head}...`` under ``prefix`` that have one of the keys
    ``{prefix}:{queue}:{suffix}``; names holding ``:`` are not looked for."""
    start = f"{prefix}:"

    def name_of(key: str) -> Optional[str]:
        name, _, suffix = key[len(start):].rpartition(":")
        return name if suffix in suffixes and name and ":" not in name else None
    return scan_names(client, f"{start}{head}*", name_of, scan_limit=scan_limit)
