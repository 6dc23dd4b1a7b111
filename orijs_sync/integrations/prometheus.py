"""Prometheus metrics (``pip install orijs_sync[prometheus]``): a thin layer over the
listener hooks of ``Worker`` and ``QueueEvents``.

    metrics = PrometheusMetrics()                # the default registry, or registry=...
    metrics.instrument_worker(worker)            # completed, failed, duration
    metrics.instrument_events(queue_events)      # added (by any process, Node's too)
    metrics.watch_queue(queue)                   # waiting depth, read at each scrape

Every metric has a ``queue`` label. ``failed`` counts failed attempts (a retried job
counts once per attempt); ``duration`` is from the job becoming active to its outcome.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..job import Job
from ..queue import Queue
from ..queue_events import QueueEvent, QueueEvents
from ..worker import Worker

log = logging.getLogger("orijs_sync.prometheus")   # the logger name users know (the module moved)

__all__ = ["PrometheusMetrics"]


class PrometheusMetrics:
    """The metrics, registered once in ``registry``; instrument any number of workers,
    event listeners and queues with them."""

    def __init__(self, registry: Optional[CollectorRegistry] = None,
                 namespace: str = "orijs") -> None:
        kwargs: Any = {"namespace": namespace, "labelnames": ["queue"]}
        if registry is not None:
            kwargs["registry"] = registry
        self.added = Counter("jobs_added", "Jobs added to the queue", **kwargs)
        self.completed = Counter("jobs_completed", "Jobs completed", **kwargs)
        self.failed = Counter("jobs_failed", "Failed job attempts", **kwargs)
        self.waiting = Gauge("jobs_waiting", "Jobs waiting to be processed (waiting, paused, "
                             "delayed, prioritized, waiting-children)", **kwargs)
        kwargs["labelnames"] = ["queue", "outcome"]
        self.duration = Histogram("job_duration_seconds", "From active to outcome", **kwargs)

    def instrument_worker(self, worker: Worker) -> Worker:
        worker.on("completed", lambda job, _result: self._finished(job, "completed"))
        worker.on("failed", lambda job, _exc: self._finished(job, "failed"))
        return worker

    def instrument_events(self, events: QueueEvents) -> QueueEvents:
        events.on_event(self._event)
        return events

    def watch_queue(self, queue: Queue) -> Queue:
        self.waiting.labels(queue=queue.name).set_function(queue.count)
        return queue

    def _event(self, event: QueueEvent) -> None:
        if event.event == "added":
            self.added.labels(queue=event.queue).inc()

    def _finished(self, job: Job, outcome: str) -> None:
        queue = job.queue.name
        (self.completed if outcome == "completed" else self.failed).labels(queue=queue).inc()
        if job.processed_on:
            seconds = max(time.time() - job.processed_on / 1000.0, 0.0)
            self.duration.labels(queue=queue, outcome=outcome).observe(seconds)
