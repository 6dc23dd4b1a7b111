"""The core on a 3-primary Redis Cluster: queues on different nodes, BullMQ's hash-tag
rule, flows, schedulers, script reload, resharding mid-run and a primary's failover."""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

import pytest
import redis
from cluster_helpers import slot_of
from redis.cluster import RedisCluster

from orijs_sync import FlowProducer, Queue, QueueEvents, Worker, errors
from orijs_sync.testing import orijs_threads, wait_until




def _completed(queue: Queue) -> int:
    return queue.get_job_counts("completed")["completed"]


def test_queues_on_three_nodes_share_one_events_thread(cluster_conn, redis_cluster,
                                                       spread_names):
    names = spread_names(3)
    assert len({redis_cluster.owner_port(slot_of("bull", n)) for n in names}) == 3
    seen: Dict[str, List[Any]] = {n: [] for n in names}
    before = {t.name for t in orijs_threads()}
    with QueueEvents(names, connection=cluster_conn) as events:
        events.on_event(lambda e: e.event == "completed" and seen[e.queue].append(e.value))
        queues = [Queue(n, connection=cluster_conn) for n in names]
        order: List[str] = []
        first = queues[0]
        first.add("p", {"n": "late"}, priority=10)
        first.add("p", {"n": "plain"})
        first.add("p", {"n": "first"}, priority=1)
        for q in queues[1:]:
            for i in range(20):
                q.add("x", {"i": i})
        new_threads = {t.name for t in orijs_threads()} - before
        assert len([t for t in new_threads if "event" in t]) == 1, new_threads
        with Worker(names[0], lambda j: order.append(j.data["n"]), connection=cluster_conn), \
                Worker(names[1], lambda j: j.data["i"] * 2, connection=cluster_conn,
                       concurrency=4), \
                Worker(names[2], lambda j: j.data["i"] * 3, connection=cluster_conn,
                       concurrency=4):
            wait_until(lambda: [len(seen[n]) for n in names] == [3, 20, 20], 30,
                       "completed events of the three queues")
        assert order == ["plain", "first", "late"]    # BullMQ's order, as on one Redis
        assert sorted(seen[names[1]]) == [i * 2 for i in range(20)]
        assert sorted(seen[names[2]]) == [i * 3 for i in range(20)]
        for q in queues:
            q.close()


def test_every_connection_form_is_accepted(redis_cluster, spread_names):
    name = spread_names(1)[0]
    native = RedisCluster(host="127.0.0.1", port=redis_cluster.servers[0].port)
    try:
        forms = [redis_cluster.urls, {"startup_nodes": redis_cluster.startup_nodes}, native]
        for form in forms:
            with Queue(name, connection=form) as queue:
                queue.add("x", {})
        with Queue(name, connection=forms[0]) as queue:
            assert queue.count() == 3
    finally:
        native.close()


def test_a_queue_without_hash_tag_is_refused_on_a_cluster(cluster_conn, namespace, redis_url):
    plain = f"plain-{namespace}"
    for make in (lambda: Queue(plain, connection=cluster_conn),
                 lambda: Worker(plain, lambda j: None, connection=cluster_conn),
                 lambda: QueueEvents(plain, connection=cluster_conn)):
        with pytest.raises(errors.CrossSlotError, match="hash tag"):
            make()
    with Queue(plain, connection=cluster_conn, prefix="{bull}") as tagged:
        assert tagged.add("x", {}).id
    with Queue(plain, connection=redis_url) as single:       # one Redis: any name
        assert single.add("x", {}).id


def test_flows_need_one_hash_tag_for_all_their_queues(cluster_conn, namespace):
    tag = f"{{{namespace}-flow}}"
    with FlowProducer(connection=cluster_conn) as flows, \
            Queue(f"{tag}parent", connection=cluster_conn) as parents:
        with pytest.raises(errors.CrossSlotError, match="same hash tag"):
            flows.add({"name": "p", "queue_name": f"{{{namespace}-other}}parent", "data": {},
                       "children": [{"name": "c", "queue_name": f"{tag}child", "data": {}}]})
        assert parents.count() == 0
        node = flows.add({"name": "p", "queue_name": f"{tag}parent", "data": {},
                          "children": [{"name": "c", "queue_name": f"{tag}child",
                                        "data": {"x": 4}}]})
        with Worker(f"{tag}child", lambda j: j.data["x"] + 1, connection=cluster_conn), \
                Worker(f"{tag}parent", lambda j: j.get_children_values(),
                       connection=cluster_conn):
            wait_until(lambda: node.job.get_state() == "completed", 30, "the parent")
        assert list(parents.get_job(node.job.id).returnvalue.values()) == [5]


def test_job_scheduler_runs_on_a_cluster(cluster_conn, spread_names):
    name = spread_names(1)[0]
    runs: List[int] = []
    with Queue(name, connection=cluster_conn) as queue:
        queue.upsert_job_scheduler("tick", every=0.2, template={"name": "tick",
                                                                "data": {"v": 1}})
        with Worker(name, lambda j: runs.append(j.data["v"]), connection=cluster_conn):
            wait_until(lambda: len(runs) >= 3, 30, "three runs of the scheduler")
        assert queue.get_job_schedulers_count() == 1


def test_an_error_reply_on_a_cluster_is_a_library_error(cluster_conn, rc, spread_names):
    """WRONGTYPE from a job read, a count and a script: errors.RedisError (redis-py's
    as __cause__), as on one Redis; a script flush still reloads (NOSCRIPT is not one)."""
    name = spread_names(1)[0]
    with Queue(name, connection=cluster_conn) as queue:
        rc.set(queue.keys.job("7"), "not a hash")
        rc.set(queue.keys.wait, "not a list")
        calls = [lambda: queue.get_job("7"), lambda: queue.get_job_counts("waiting"),
                 lambda: queue.add("x", {})]
        for call in calls:
            with pytest.raises(errors.RedisError, match="WRONGTYPE") as excinfo:
                call()
            assert isinstance(excinfo.value.__cause__, redis.exceptions.ResponseError)
            assert "cluster" in str(excinfo.value)
        rc.delete(queue.keys.wait)
        rc.execute_command("SCRIPT", "FLUSH", target_nodes=RedisCluster.ALL_NODES)
        assert queue.add("x", {}).id


def test_scripts_reload_after_a_script_flush(cluster_conn, rc, spread_names):
    name = spread_names(1)[0]
    with Queue(name, connection=cluster_conn) as queue:
        queue.add("x", {})
        with Worker(name, lambda j: None, connection=cluster_conn):
            wait_until(lambda: _completed(queue) == 1, 30)
            rc.execute_command("SCRIPT", "FLUSH", target_nodes=RedisCluster.ALL_NODES)
            for _ in range(5):
                queue.add("x", {})
            wait_until(lambda: _completed(queue) == 6, 30, "jobs after SCRIPT FLUSH")


def test_a_slot_resharded_mid_run(cluster_conn, redis_cluster, spread_names):
    name = spread_names(1)[0]
    slot = slot_of("bull", name)
    done: List[str] = []
    with Queue(name, connection=cluster_conn) as queue, \
            QueueEvents(name, connection=cluster_conn) as events:
        events.on("completed", lambda job_id, value: done.append(job_id))
        with Worker(name, lambda j: time.sleep(0.005), connection=cluster_conn,
                    concurrency=4):
            for i in range(200):
                queue.add("x", {"i": i})
            wait_until(lambda: len(done) >= 20, 30, "the first jobs")
            old = redis_cluster.owner_port(slot)
            target = next(s.port for s in redis_cluster.servers if s.port != old)
            redis_cluster.move_slot(slot, target)
            assert redis_cluster.owner_port(slot) == target
            for i in range(100):
                queue.add("x", {"i": 200 + i})
            wait_until(lambda: _completed(queue) == 300, 60, "every job after resharding")
            wait_until(lambda: len(set(done)) == 300, 30, "every completed event")


def test_a_primary_fails_over_mid_run(cluster_with_replicas):
    cluster = cluster_with_replicas
    conn = {"startup_nodes": cluster.startup_nodes}
    name = "{failover}q"
    slot = slot_of("bull", name)
    done: set = set()
    lock = threading.Lock()

    def record(job_id: str, value: Any) -> None:
        with lock:
            done.add(job_id)

    with Queue(name, connection=conn) as queue, \
            QueueEvents(name, connection=conn) as events:
        events.on("completed", record)
        ids = [queue.add("x", {"i": i}).id for i in range(300)]
        primary = cluster.server_at(cluster.owner_port(slot))
        _wait_replicated(primary.port)
        with Worker(name, lambda j: time.sleep(0.01), connection=conn, concurrency=4,
                    lock_duration=3, stalled_interval=1):
            wait_until(lambda: len(done) >= 30, 30, "the first jobs")
            primary.kill()
            wait_until(lambda: cluster.owner_port(slot) != primary.port, 60,
                       "a replica to take the slot over")
            queue.add("after", {}, job_id="after-failover")
            wait_until(lambda: _completed(queue) == 301, 90, "every job after the failover")
            wait_until(lambda: "after-failover" in done, 30, "events after the failover")
        assert set(ids) <= {job.id for job in queue.get_jobs(["completed"], 0, -1)}


def _wait_replicated(port: int) -> None:
    client = redis.Redis(port=port, socket_timeout=10)
    try:
        assert client.execute_command("WAIT", 1, 5000) >= 1
    finally:
        client.close()


def test_a_queue_added_to_a_running_events_thread_on_another_node(cluster_conn, redis_cluster,
                                                                    spread_names):
    first, second = spread_names(2)
    assert redis_cluster.owner_port(slot_of("bull", first)) != \
        redis_cluster.owner_port(slot_of("bull", second))
    seen: List[str] = []
    with QueueEvents(first, connection=cluster_conn, block_timeout=30) as events, \
            Queue(second, connection=cluster_conn) as queue:
        events.on_event(lambda e: e.event == "added" and seen.append(e.queue))
        time.sleep(0.3)                 # the XREAD on the first queue's node is waiting
        events.add_queue(second)
        queue.add("x", {})
        # Well within the 30 s block: the new stream was read at once, not after it.
        wait_until(lambda: second in seen, 10, "the new queue's event")
