"""orijs_sync[prometheus]: counters, histogram and gauge per queue, with prometheus_client."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from orijs_sync import Job, QueueEvents, Worker
from orijs_sync.prometheus import PrometheusMetrics
from orijs_sync.testing import wait_until


def handler(job: Job) -> int:
    if job.name == "bad":
        raise ValueError("bad job")
    return 1


def value(registry, name, **labels):
    return registry.get_sample_value(name, labels) or 0.0


def test_counts_durations_and_depth_per_queue(queue, redis_url, qname):
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry=registry)
    metrics.watch_queue(queue)
    with QueueEvents(qname, redis_url) as events:
        metrics.instrument_events(events)
        queue.add("later", {}, delay=3600)
        wait_until(lambda: value(registry, "orijs_jobs_added_total", queue=qname) == 1,
                   timeout=30, what="the added event counted")
        assert value(registry, "orijs_jobs_waiting", queue=qname) == 1
        queue.add_bulk([{"name": "ok"}, {"name": "ok"}, {"name": "bad", "opts": {"attempts": 2}}])
        worker = metrics.instrument_worker(Worker(qname, handler, redis_url, drain_delay=1))
        with worker.start():
            wait_until(lambda: value(registry, "orijs_jobs_failed_total", queue=qname) == 2,
                       timeout=30, what="both attempts of the bad job")
            wait_until(lambda: value(registry, "orijs_jobs_completed_total", queue=qname) == 2,
                       timeout=30, what="the good jobs")
        wait_until(lambda: value(registry, "orijs_jobs_added_total", queue=qname) == 4,
                   timeout=30, what="every add counted")
    assert value(registry, "orijs_jobs_waiting", queue=qname) == 1      # the delayed one
    assert value(registry, "orijs_job_duration_seconds_count", queue=qname,
                 outcome="completed") == 2
    assert value(registry, "orijs_job_duration_seconds_count", queue=qname,
                 outcome="failed") == 2
    text = generate_latest(registry).decode()
    assert f'orijs_jobs_completed_total{{queue="{qname}"}} 2.0' in text
