"""BullMQ's metrics and worker list, read from a queue.

A worker made with ``metrics={"max_data_points": n}`` counts its completed and
failed jobs per minute in BullMQ's keys (``{prefix}:{queue}:metrics:completed``
and ``:failed``, written by ``orijs_sync/lua/includes/metrics.lua`` as each job finishes);
``MonitoringMixin.get_metrics`` reads them as BullMQ's ``getMetrics()`` does,
whichever language's workers wrote them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from .base import validate as check
from .keys import QueueKeys
from .store.workers_list import list_workers

log = logging.getLogger(__name__)

METRIC_TYPES = ("completed", "failed")
ONE_HOUR = 60           # data points (minutes): BullMQ's MetricsTime values
ONE_DAY = 60 * 24
ONE_WEEK = 60 * 24 * 7
ONE_MONTH = 60 * 24 * 30
MAX_DATA_POINTS = 60 * 24 * 366   # a year of minutes: bounds the list a worker keeps


@dataclass(frozen=True)
class MetricsMeta:
    """``count``: jobs counted so far; ``prev_ts``: when (ms) the last data point was
    written; ``prev_count``: ``count`` at that time."""

    count: int = 0
    prev_ts: int = 0
    prev_count: int = 0


@dataclass(frozen=True)
class Metrics:
    """What BullMQ's ``getMetrics()`` returns: ``data`` is jobs per minute, newest
    first (from ``start`` to ``end``); ``count`` is how many points are stored."""

    meta: MetricsMeta = field(default_factory=MetricsMeta)
    data: List[int] = field(default_factory=list)
    count: int = 0


def max_data_points(metrics: Optional[Mapping[str, Any]]) -> Optional[int]:
    """A worker's ``metrics`` option (``{"max_data_points": n}``, or None for no
    metrics) -> how many points to keep."""
    if metrics is None:
        return None
    options = check.mapping(metrics, "metrics")
    check.known_keys(options, ("max_data_points",), "metrics")
    if "max_data_points" not in options:
        check.bad_value("metrics", metrics, "must be {'max_data_points': n}")
    return check.integer(options["max_data_points"], "metrics.max_data_points", minimum=1,
                         maximum=MAX_DATA_POINTS)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def read_metrics(client: Any, keys: QueueKeys, kind: str, start: int, end: int) -> Metrics:
    """The metrics of one kind, read atomically (one MULTI)."""
    meta_key = keys.key(f"metrics:{kind}")
    pipe = client.pipeline(transaction=True)
    pipe.hmget(meta_key, "count", "prevTS", "prevCount")
    pipe.lrange(f"{meta_key}:data", start, end)
    pipe.llen(f"{meta_key}:data")
    (count, prev_ts, prev_count), data, points = pipe.execute()
    return Metrics(MetricsMeta(_int(count), _int(prev_ts), _int(prev_count)),
                   [_int(point) for point in data], int(points))


class MonitoringMixin:
    """Mixed into ``orijs_sync.queue.Queue``: metrics and the workers list."""

    keys: QueueKeys
    client: Any
    name: str
    prefix: str

    def get_metrics(self, kind: str, start: int = 0, end: int = -1) -> Metrics:
        """Jobs completed (``kind="completed"``) or failed per minute, as recorded by
        workers with ``metrics`` on (Python or Node); ``start``/``end`` index the
        points, newest first (0 .. -1: all of them)."""
        check.one_of(kind, METRIC_TYPES, "kind", "metrics type")
        start = check.integer(start, "start", minimum=-check.MAX_INT)
        end = check.integer(end, "end", minimum=-check.MAX_INT)
        return read_metrics(self.client, self.keys, kind, start, end)

    def get_workers(self) -> List[Dict[str, str]]:
        """The workers of this queue, Python's and Node's, from ``CLIENT LIST``: one dict
        per worker connection (``name`` the queue name, ``rawname`` the connection
        name, plus ``CLIENT LIST``'s fields: ``addr``, ``age``, ``idle``...), as BullMQ's
        ``getWorkers()`` returns them. Empty where the server refuses ``CLIENT LIST``."""
        return list_workers(self.client, self.prefix, self.name)

    def get_workers_count(self) -> int:
        """How many workers (either side's) are connected to the queue (``get_workers``)."""
        return len(self.get_workers())
