"""Node BullMQ (an ioredis Cluster) and orijs_sync sharing queues on a 3-primary Redis
Cluster, both directions, each queue under its own hash tag as BullMQ requires."""
from __future__ import annotations

from typing import Any, Dict, List

from orijs_sync import Queue, QueueEvents, Worker
from orijs_sync.testing import wait_until


def test_node_adds_python_works_on_a_cluster(node, redis_cluster, namespace):
    conn = {"startup_nodes": redis_cluster.startup_nodes}
    name = f"{{{namespace}-n2p}}q"
    ids = node("addBulk", cluster=redis_cluster.startup_nodes, queue=name,
               jobs=[{"name": "sum", "data": {"a": i, "b": 10}} for i in range(5)])
    with Worker(name, lambda job: job.data["a"] + job.data["b"], connection=conn), \
            Queue(name, connection=conn) as queue:
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 5, 30)
    for i, job_id in enumerate(ids):
        job = node("getJob", cluster=redis_cluster.startup_nodes, queue=name, id=job_id)
        assert job["state"] == "completed" and job["returnvalue"] == i + 10


def test_python_adds_node_works_on_a_cluster(node, redis_cluster, namespace):
    conn = {"startup_nodes": redis_cluster.startup_nodes}
    name = f"{{{namespace}-p2n}}q"
    seen: Dict[str, Any] = {}
    with Queue(name, connection=conn) as queue, QueueEvents(name, connection=conn) as events:
        events.on("completed", lambda job_id, value: seen.__setitem__(job_id, value))
        ids: List[str] = [queue.add("echo", {"i": i}).id for i in range(5)]
        reply = node("work", cluster=redis_cluster.startup_nodes, queue=name, count=5,
                     concurrency=2, timeout=60)
        assert sorted(r["returnvalue"]["echo"]["i"] for r in reply["results"]) == list(range(5))
        wait_until(lambda: set(ids) <= set(seen), 30, "Python's events of Node's work")
        assert {seen[i]["echo"]["i"] for i in ids} == set(range(5))
        assert all(queue.get_job(i).get_state() == "completed" for i in ids)
