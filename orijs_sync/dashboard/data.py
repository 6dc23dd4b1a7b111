"""What the pages read from Redis: the queue directory (found by SCAN, cached) and
each queue's summary (counts, meta, metrics), all pipelined so that a page costs a
bounded number of round trips whatever the number of jobs."""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import redis

from .. import errors
from ..keys import QueueKeys
from ..store.workers_list import parse_client_list, queue_client_name

SCAN_COUNT = 1000
LIST_STATES = ("wait", "active", "paused")
ZSET_STATES = ("prioritized", "delayed", "completed", "failed", "waiting-children")
STATES = ("wait", "active", "paused", "prioritized", "delayed", "completed", "failed",
          "waiting-children")
CHART_POINTS = 60          # an hour of BullMQ's per-minute data points
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


class QueueDirectory:
    """The queue names under a prefix: every ``{prefix}:{name}:meta`` hash (BullMQ writes
    it with a queue's first job), found by SCAN in steps of ``SCAN_COUNT`` (never KEYS)
    and kept ``ttl`` seconds. Once known, the list is served from the cache while one
    background thread refreshes it, so no page waits for a scan after the first."""

    def __init__(self, client: Any, prefix: str, *, ttl: float) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl = ttl
        self._names: Optional[List[str]] = None
        self._at = 0.0
        self._lock = threading.Lock()
        self._refresher: Optional[threading.Thread] = None
        self._stop = threading.Event()

    def names(self) -> List[str]:
        """Every queue name, sorted (a scan now if none is cached, or with no ``ttl``)."""
        if self.ttl <= 0:
            return self.scan()
        with self._lock:
            names, fresh = self._names, time.monotonic() - self._at < self.ttl
            if names is not None and not fresh and self._refresher is None \
                    and not self._stop.is_set():
                self._refresher = threading.Thread(target=self._refresh_in_background,
                                                   name="orijs-dashboard-scan", daemon=True)
                self._refresher.start()
        if names is None:
            names = self.scan()
            self._store(names)
        return names

    def forget(self) -> None:
        """Drop the cache (after a change the next page must see)."""
        with self._lock:
            self._at = 0.0

    def scan(self) -> List[str]:
        pattern = _GLOB_SPECIAL.sub(r"\\\1", self.prefix) + ":*:meta"
        start = len(self.prefix) + 1
        found = set()
        for key in self.client.scan_iter(match=pattern, count=SCAN_COUNT, _type="hash"):
            name = key[start:-len(":meta")]
            if name and ":" not in name:      # a job id ending in ":meta" is no queue
                found.add(name)
            if self._stop.is_set():
                break
        return sorted(found)

    def _store(self, names: List[str]) -> None:
        with self._lock:
            self._names, self._at = names, time.monotonic()

    def _refresh_in_background(self) -> None:
        try:
            self._store(self.scan())
        except Exception:   # noqa: BLE001 - the stale list stays; the next page retries
            with self._lock:
                self._at = time.monotonic() - self.ttl / 2
        finally:
            with self._lock:
                self._refresher = None

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._lock:
            refresher = self._refresher
        if refresher is not None:
            refresher.join(timeout)


@dataclass
class QueueSummary:
    """One queue as the pages show it."""

    name: str
    counts: Dict[str, int]
    paused: bool
    concurrency: Optional[int]
    rate_limit: Optional[Dict[str, int]]     # {"max": n, "duration": ms}
    completed_per_minute: List[int] = field(default_factory=list)   # newest first
    failed_per_minute: List[int] = field(default_factory=list)
    workers: List[Dict[str, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def summaries(client: Any, prefix: str, names: Sequence[str], *,
              points: int = 0) -> List[QueueSummary]:
    """The summaries of ``names`` in one pipelined round trip (plus ``points`` of each
    metric's data when asked)."""
    pipe = client.pipeline(transaction=False)
    for name in names:
        keys = QueueKeys(prefix, name)
        for state in STATES:
            (pipe.llen if state in LIST_STATES else pipe.zcard)(keys.key(state))
        pipe.hmget(keys.meta, "paused", "concurrency", "max", "duration")
        if points:
            for kind in ("completed", "failed"):
                pipe.hmget(keys.key(f"metrics:{kind}"), "count", "prevTS", "prevCount")
                pipe.lrange(keys.key(f"metrics:{kind}:data"), 0, points - 1)
    replies = iter(pipe.execute() if names else [])
    result = []
    for name in names:
        counts = {state: int(next(replies)) for state in STATES}
        paused, concurrency, max_jobs, duration = next(replies)
        summary = QueueSummary(name, counts, paused is not None, _int(concurrency),
                               _rate(max_jobs, duration))
        if points:
            now = time.time() * 1000
            summary.completed_per_minute = _per_minute(next(replies), next(replies), now, points)
            summary.failed_per_minute = _per_minute(next(replies), next(replies), now, points)
        result.append(summary)
    return result


def workers_by_queue(client: Any, prefix: str, names: Sequence[str]) -> Dict[str, List[Dict[str, str]]]:
    """The worker connections of each queue in ``names``, from one ``CLIENT LIST``
    (empty where the server refuses it)."""
    wanted = {queue_client_name(prefix, name): name for name in names}
    found: Dict[str, List[Dict[str, str]]] = {name: [] for name in names}
    try:
        raw = client.execute_command("CLIENT", "LIST")
    except (redis.exceptions.ResponseError, errors.PermissionDenied):
        return found        # ACL users and managed Redis may refuse it
    clients = parse_client_list(raw if isinstance(raw, str) else raw.decode("utf-8", "replace"))
    for entry in clients:
        raw = entry.get("name", "")
        base = raw.split(":w:", 1)[0]
        if base in wanted:
            found[wanted[base]].append({**entry, "rawname": raw,
                                        "name": raw.split(":w:", 1)[1] if ":w:" in raw else ""})
    return found


def _per_minute(meta: Sequence[Any], stored: Sequence[Any], now_ms: float,
                points: int) -> List[int]:
    """Jobs per minute, newest first: BullMQ's data list holds the closed minutes; the jobs
    counted since its last point (``count - prevCount``, at ``prevTS``) come before it,
    after a zero for each minute since."""
    count, prev_ts, prev_count = (_int(v) for v in meta)
    series = [_int(v) or 0 for v in stored]
    if count is None or prev_ts is None:
        return series[:points]
    idle = max(0, int(now_ms // 60000) - prev_ts // 60000)
    return ([0] * min(idle, points) + [count - (prev_count or 0)] + series)[:points]


def _int(value: Any) -> Optional[int]:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _rate(max_jobs: Any, duration: Any) -> Optional[Dict[str, int]]:
    max_n, ms = _int(max_jobs), _int(duration)
    return {"max": max_n, "duration": ms} if max_n is not None and ms is not None else None
