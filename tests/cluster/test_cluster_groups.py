"""Group queues on a 3-primary Redis Cluster: a queue name with a hash tag keeps all of
GroupMQ's keys of that queue in one slot; one without is refused before anything is
written; order and exclusivity per group hold on whichever node owns the queue."""
from __future__ import annotations

import threading
from typing import Dict, List, Tuple

import pytest
from cluster_helpers import slot_of

from orijs_sync import errors
from orijs_sync.groups import GroupQueue, GroupWorker
from orijs_sync.testing import wait_until


def test_a_group_queue_without_a_hash_tag_is_refused_on_a_cluster(cluster_conn, rc):
    before = rc.dbsize()
    with pytest.raises(errors.CrossSlotError, match="hash tag"):
        GroupQueue("no-tag-groups", connection=cluster_conn)
    assert rc.dbsize() == before


def test_groups_keep_order_and_exclusivity_on_every_node(cluster_conn, redis_cluster,
                                                        spread_names, rc):
    names = spread_names(3)
    assert len({redis_cluster.owner_port(slot_of("groupmq", n)) for n in names}) == 3
    lock = threading.Lock()
    running: Dict[Tuple[str, str], int] = {}
    overlaps: List[Tuple[str, str]] = []
    done: Dict[Tuple[str, str], List[int]] = {}

    def handler(job):
        key = (job.data["q"], job.group_id)
        with lock:
            running[key] = running.get(key, 0) + 1
            if running[key] > 1:
                overlaps.append(key)
        try:
            with lock:
                done.setdefault(key, []).append(job.data["n"])
        finally:
            with lock:
                running[key] -= 1
        return job.data["n"]

    queues = [GroupQueue(n, connection=cluster_conn) for n in names]
    workers = [GroupWorker(q, handler, concurrency=4) for q in queues]
    try:
        for q in queues:
            for n in range(10):
                for g in ("a", "b", "c"):
                    q.add(group_id=g, data={"q": q.name, "n": n})
        for w in workers:
            w.start()
        wait_until(lambda: sum(len(v) for v in done.values()) == 90, 60,
                   "every group job on the three nodes")
    finally:
        for w in workers:
            w.close(timeout=10)
    assert overlaps == []
    assert all(order == list(range(10)) for order in done.values()), done
    for q in queues:
        counts = q.get_job_counts()
        assert (counts["active"], counts["waiting"], counts["failed"]) == (0, 0, 0), counts
        assert q.get_unique_groups() == []       # every group emptied and released
        q.close()
