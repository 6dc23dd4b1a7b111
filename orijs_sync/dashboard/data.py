"""What the pages read from Redis: the queue directory (found by SCAN, cached) and
each queue's summary (counts, meta, metrics), all pipelined so that a page costs a
bounded number of round trips whatever the number of jobs."""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set

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
    it with a queue's first job), found by SCAN in steps of ``SCAN_COUNT`` keys (never
    KEYS). A background thread scans the keyspace, and again ``ttl`` seconds after each
    pass; pages read the last complete pass (plus what the running one found so far),
    waiting at most ``first_wait`` seconds for the very first pass, so no page waits for
    a scan of a large keyspace. ``ttl <= 0`` scans on every call instead (tests).
    ``fixed`` names the queues and skips scanning altogether."""

    def __init__(self, client: Any, prefix: str, *, ttl: float, first_wait: float = 0.3,
                 fixed: Optional[Sequence[str]] = None) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl = ttl
        self.first_wait = first_wait
        self.fixed = sorted(set(fixed)) if fixed is not None else None
        self._done: Optional[List[str]] = None     # the last complete pass
        self._partial: Set[str] = set()             # the running pass so far
        self._error: Optional[BaseException] = None
        self._lock = threading.Lock()
        self._first_pass = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def complete(self) -> bool:
        """Whether the names come from a complete pass."""
        return self.fixed is not None or self.ttl <= 0 or self._done is not None

    def names(self) -> List[str]:
        """Every queue name known, sorted."""
        if self.fixed is not None:
            return list(self.fixed)
        if self.ttl <= 0:
            return self.scan(set())
        if self._ensure_thread():
            self._first_pass.wait(self.first_wait)     # only the call that started it waits
        with self._lock:
            error = self._error
            if error is not None and self._done is None:
                raise error         # nothing to show: the page says why (an outage...)
            return sorted(set(self._done or ()) | self._partial)

    def forget(self) -> None:
        """Scan again now (after a change the next pages must see)."""
        self._wake.set()

    def scan(self, into: Set[str]) -> List[str]:
        """One pass over the keyspace, adding each queue name to ``into`` as found."""
        pattern = _GLOB_SPECIAL.sub(r"\\\1", self.prefix) + ":*:meta"
        start = len(self.prefix) + 1
        for key in self.client.scan_iter(match=pattern, count=SCAN_COUNT, _type="hash"):
            name = key[start:-len(":meta")]
            if name and ":" not in name:      # a job id ending in ":meta" is no queue
                with self._lock:
                    into.add(name)
            if self._stop.is_set():
                break
        return sorted(into)

    def _ensure_thread(self) -> bool:
        """Start the scanning thread unless it runs (after a fork it does not); returns
        whether it was started now."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive() or self._stop.is_set():
                return False
            self._first_pass.clear()
            self._thread = threading.Thread(target=self._loop, name="orijs-dashboard-scan",
                                            daemon=True)
            self._thread.start()
            return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.loop()
            self._wake.wait(self.ttl if self._error is None else min(self.ttl, 2.0))
            self._wake.clear()

    def loop(self) -> None:
        """One pass; a failure (Redis down) is kept for the next page to report."""
        found: Set[str] = set()
        with self._lock:
            self._partial = found
        try:
            names = self.scan(found)
        except Exception as exc:   # noqa: BLE001 - the page reports it; the next pass retries
            with self._lock:
                self._error = exc
        else:
            with self._lock:
                if not self._stop.is_set():
                    self._done, self._error = names, None
        finally:
            with self._lock:
                self._partial = set()
            self._first_pass.set()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)


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
