"""A Node BullMQ worker shares one of the queues of a Python WorkerGroup serving
several queues: both take jobs of that queue, each job runs once, the other queues go on."""
from __future__ import annotations

import threading
import time
from typing import List

from orijs_sync import Queue, Worker, WorkerGroup
from orijs_sync.connection import RedisConnection
from orijs_sync.testing import wait_until


def test_node_worker_shares_one_queue_of_a_python_engine(node, redis_url, namespace):
    shared, others = f"eng-{namespace}-shared", [f"eng-{namespace}-{i}" for i in range(3)]
    conn = RedisConnection(redis_url)
    group = WorkerGroup(conn)
    ran: List[str] = []
    lock = threading.Lock()

    def slow(job):
        with lock:
            ran.append(job.id)
        time.sleep(0.3)           # leaves jobs for the Node worker
        return {"py": job.data["i"]}

    workers = [Worker(shared, slow, group=group).start()]
    workers += [Worker(n, lambda job: {"py": job.data["i"]}, group=group).start()
                for n in others]
    try:
        queue = Queue(shared, connection=conn)
        jobs = queue.add_bulk([{"name": "send", "data": {"i": i}} for i in range(30)])
        reply = node("work", queue=shared, count=3, timeout=90)
        assert not reply["timedOut"], reply
        by_node = [r["id"] for r in reply["results"] if r["final"]]
        for n in others:
            Queue(n, connection=conn).add_bulk([{"name": "x", "data": {"i": i}}
                                               for i in range(5)])
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 30, 60)
        for n in others:
            wait_until(lambda n=n: Queue(n, connection=conn).get_job_counts(
                "completed")["completed"] == 5, 30)
        assert len(by_node) >= 3 and not set(by_node) & set(ran)
        assert sorted(by_node + ran, key=int) == [j.id for j in jobs]   # each ran once
        for job_id in by_node:
            assert queue.get_job(job_id).returnvalue == {"echo": {"i": int(job_id) - 1}}
    finally:
        group.close()
        conn.close()
