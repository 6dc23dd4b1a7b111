"""Deduplication's replace and keepLastIfActive modes across orijs_sync and Node
BullMQ: each run is compared with the same run done by Node alone (Node adds,
Node works), which is the behaviour to match.

Timeouts here are failure guards only; no assertion depends on timing.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

from orijs_sync import Queue, Worker
from orijs_sync.testing import wait_until

GUARD = 30.0
NODE_KEEP = {"deduplication": {"id": "d", "keepLastIfActive": True}}
PY_KEEP = {"id": "d", "keep_last_if_active": True}
NODE_REPLACE = {"deduplication": {"id": "d", "replace": True}}
PY_REPLACE = {"id": "d", "replace": True}
DELAY_MS = 3000

Run = Tuple[List[str], List[Tuple[str, Any]]]   # (ids the adds gave, (id, data) of each run)


def dedup_keys(r, name: str) -> List[str]:
    return sorted(r.scan_iter(match=f"bull:{name}:d[en]:*"))


def is_active(r, name: str, job_id: str) -> bool:
    return job_id in r.lrange(f"bull:{name}:active", 0, -1)


def node_runs(reply: Dict[str, Any]) -> List[Tuple[str, Any]]:
    assert not reply["timedOut"], reply
    return [(res["id"], res["returnvalue"]["echo"]) for res in reply["results"]]


def node_keeps_last(node, r, name: str, hold: Path) -> Run:
    """The reference: Node adds three duplicates while the first is active, Node works."""
    work = node.start("work", queue=name, count=2, workTimeout=GUARD, holdFile=str(hold))
    first = node("add", queue=name, name="x", data={"v": 1}, opts=NODE_KEEP)["id"]
    wait_until(lambda: is_active(r, name, first), GUARD, "the first job active")
    ids = [first] + [node("add", queue=name, name="x", data={"v": v}, opts=NODE_KEEP)["id"]
                     for v in (2, 3)]
    hold.touch()
    return ids, node_runs(work.result())


def test_node_adds_keep_last_if_active_and_a_python_worker_runs_the_last(
        node, redis_url, namespace, r, tmp_path):
    expected = node_keeps_last(node, r, f"ref-{namespace}", tmp_path / "hold")
    assert expected == (["1", "1", "1"], [("1", {"v": 1}), ("3", {"v": 3})])
    name = f"py-{namespace}"
    started, release = threading.Event(), threading.Event()
    seen: List[Tuple[str, Any]] = []

    def handler(job):
        seen.append((job.id, job.data))
        started.set()
        release.wait(GUARD)
        return {"echo": job.data}

    with Worker(name, handler, connection=redis_url):
        first = node("add", queue=name, name="x", data={"v": 1}, opts=NODE_KEEP)["id"]
        assert started.wait(GUARD)
        ids = [first] + [node("add", queue=name, name="x", data={"v": v}, opts=NODE_KEEP)["id"]
                         for v in (2, 3)]
        release.set()
        wait_until(lambda: len(seen) == 2 and r.zcard(f"bull:{name}:completed") == 2
                   and r.llen(f"bull:{name}:active") == 0, GUARD, "both runs")
    assert (ids, seen) == expected
    assert dedup_keys(r, name) == dedup_keys(r, f"ref-{namespace}") == []


def test_python_adds_keep_last_if_active_and_node_works_as_with_its_own_adds(
        node, redis_url, namespace, r, tmp_path):
    expected = node_keeps_last(node, r, f"ref-{namespace}", tmp_path / "ref-hold")
    name, hold = f"py-{namespace}", tmp_path / "hold"
    with Queue(name, connection=redis_url) as queue:
        work = node.start("work", queue=name, count=2, workTimeout=GUARD, holdFile=str(hold))
        first = queue.add("x", {"v": 1}, deduplication=PY_KEEP).id
        wait_until(lambda: is_active(r, name, first), GUARD, "the first job active")
        ids = [first] + [queue.add("x", {"v": v}, deduplication=PY_KEEP).id for v in (2, 3)]
        hold.touch()
        assert (ids, node_runs(work.result())) == expected
    assert dedup_keys(r, name) == []


def node_view(node, name: str, ids: List[str]) -> List[Any]:
    """What Node reads of each job: its name, data, delay, options and state."""
    out = []
    for job_id in ids:
        job = node("getJob", queue=name, id=job_id)
        out.append(job and {key: job[key] for key in ("name", "data", "delay", "state",
                                                      "deduplicationId")}
                   | {"opts": {k: job["opts"].get(k) for k in ("attempts", "deduplication")}})
    return out


def test_python_adds_with_replace_and_node_sees_and_runs_what_its_own_adds_give(
        node, redis_url, namespace, r):
    ref = f"ref-{namespace}"
    ref_ids = node("addBulk", queue=ref, jobs=[
        {"name": "x", "data": {"v": 1}, "opts": dict(NODE_REPLACE, delay=DELAY_MS)},
        {"name": "y", "data": {"v": 2}, "opts": dict(NODE_REPLACE, delay=DELAY_MS, attempts=2)}])
    name = f"py-{namespace}"
    with Queue(name, connection=redis_url) as queue:
        ids = [queue.add("x", {"v": 1}, delay=DELAY_MS / 1000, deduplication=PY_REPLACE).id,
               queue.add("y", {"v": 2}, delay=DELAY_MS / 1000, attempts=2,
                         deduplication=PY_REPLACE).id]
    assert ids == ref_ids == ["1", "2"]
    expected = node_view(node, ref, ref_ids)
    assert expected[0] is None and expected[1]["data"] == {"v": 2}
    assert node_view(node, name, ids) == expected
    for queue_name in (ref, name):
        reply = node("work", queue=queue_name, count=1, workTimeout=GUARD)
        assert node_runs(reply) == [("2", {"v": 2})]
        assert dedup_keys(r, queue_name) == []
