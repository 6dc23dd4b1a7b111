"""Redis blips: connections dropped mid-job lose no result; roles keep running."""
from __future__ import annotations

import threading

from orijs_sync import Worker, errors
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


def test_a_finishing_write_whose_reply_was_lost_counts_as_written(queue, redis_url, qname):
    """Redis ran the write, then its reply was lost (Redis shut down before sending it):
    the retry is refused (the job is no longer active), and must be seen as our own
    write done, not as a lost lock with the job left unacknowledged."""
    worker = Worker(qname, lambda job: {"ok": job.data["n"]}, connection=redis_url)
    real = worker._run_hot_script
    lost: list = []

    def lose_first_reply(name, keys, args):
        result = real(name, keys, args)
        if name == "moveToFinished" and not lost:
            lost.append(result)
            raise errors.ConnectionError("the reply was lost (injected after the write)")
        return result
    worker._run_hot_script = lose_first_reply      # type: ignore[method-assign]
    completed: list = []
    problems: list = []
    worker.on("completed", lambda job, result: completed.append((job.id, result)))
    worker.on("error", problems.append)
    with worker:
        job = queue.add("x", {"n": 1})
        wait_until(lambda: completed == [(job.id, {"ok": 1})], 20)
    assert lost and problems == []
    assert queue.get_job(job.id).returnvalue == {"ok": 1}
