"""Redis blips: connections dropped mid-job lose no result; roles keep running."""
from __future__ import annotations

import threading

from orijs_sync import Worker
from orijs_sync.testing import orijs_threads, wait_until


def drop_clients(r) -> None:
    me = r.client_id()
    for client in r.client_list():
        if int(client["id"]) != me:
            r.client_kill_filter(_id=client["id"])


def test_connections_dropped_mid_job_lose_no_result(queue, events, redis_url, qname, r):
    running, release = threading.Event(), threading.Event()

    def handler(job):
        running.set()
        release.wait(10)
        return {"ok": job.data["n"]}

    job = queue.add("x", {"n": 1})
    with Worker(qname, handler, connection=redis_url, drain_delay=0.5):
        assert running.wait(10)
        drop_clients(r)          # every connection of the worker, the fetcher's included
        release.set()
        wait_until(lambda: queue.get_job_state(job.id) == "completed", 15)
        # The fetcher reconnected: a new job is still taken.
        later = queue.add("x", {"n": 2})
        wait_until(lambda: queue.get_job_state(later.id) == "completed", 15)
    assert queue.get_job(job.id).returnvalue == {"ok": 1}
    assert orijs_threads() == [t for t in orijs_threads() if t.name.startswith("orijs-events")]


def test_events_thread_survives_dropped_connections(queue, events, redis_url, qname, r):
    seen = []
    events.on("added", lambda job_id, name: seen.append(job_id))
    queue.add("x", {})
    wait_until(lambda: len(seen) == 1)
    drop_clients(r)
    queue.add("x", {})
    wait_until(lambda: len(seen) == 2, 15)
