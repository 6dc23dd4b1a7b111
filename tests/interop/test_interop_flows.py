"""Flows and job schedulers shared by orijs_sync and a real Node BullMQ, both ways.

Node side: tests/interop/node/driver.js (addFlowTree, workFlow, flowInfo, getFlow,
upsertJobScheduler, getJobSchedulers, getJobScheduler, work). Node handlers fail
jobs whose name starts with "fail" and otherwise return ``{"echo": data, ...}``.
Timeouts are failure guards only.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

import redis

from orijs_sync import FlowProducer, Job, JobNode, Queue, QueueEvents, Worker

GUARD = 30.0


def wait_until(predicate: Any, timeout: float = GUARD, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def py_handler(job: Job) -> Any:
    """Python side: fail "fail*" jobs; a parent returns its children's values."""
    if job.name.startswith("fail"):
        raise ValueError(f"{job.name} failed in python")
    return {"py": job.data, "children": job.get_children_values()}


def node_tree(node_reply: Dict[str, Any]) -> Dict[str, Any]:
    """Ids of a Node getFlow/addFlowTree reply as {id: [child trees]}, order-free."""
    return {node_reply["id"]: sorted((node_tree(c) for c in node_reply["children"]), key=str)}


def py_tree(node: JobNode) -> Dict[str, Any]:
    return {node.job.id: sorted((py_tree(c) for c in node.children), key=str)}


def run_final(node_reply: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    assert not node_reply["timedOut"], node_reply
    return {r["id"]: r for r in node_reply["results"] if r["final"]}


# ---------------------------------------------------------------------------
# Flows
# ---------------------------------------------------------------------------

def test_node_flow_runs_on_python_workers(node, redis_url, namespace):
    top_q, step_q = f"orders-{namespace}", f"steps-{namespace}"
    added = node("addFlowTree", tree={
        "name": "order", "queue": top_q, "data": {"order": 1},
        "children": [
            {"name": "charge", "queue": step_q, "data": {"amount": 12.5}},
            {"name": "pack", "queue": step_q, "data": {"box": "L"},
             "children": [{"name": "pick", "queue": step_q, "data": {"sku": "a\u00e9"}}]},
        ]})
    with Queue(top_q, connection=redis_url) as top, \
            QueueEvents(top_q, connection=redis_url) as events:
        assert top.get_job_state(added["id"]) == "waiting-children"
        with Worker(step_q, py_handler, connection=redis_url, concurrency=2), \
                Worker(top_q, py_handler, connection=redis_url):
            result = top.get_job(added["id"]).wait_until_finished(events, timeout=GUARD)
        parent = top.get_job(added["id"])
        py_values = parent.get_children_values()
        charge, pack = added["children"]
        assert py_values == {
            f"bull:{step_q}:{charge['id']}": {"py": {"amount": 12.5}, "children": {}},
            f"bull:{step_q}:{pack['id']}": {"py": {"box": "L"}, "children": {
                f"bull:{step_q}:{pack['children'][0]['id']}": {"py": {"sku": "a\u00e9"},
                                                               "children": {}}}},
        }
        assert result == {"py": {"order": 1}, "children": py_values}
        info = node("flowInfo", queue=top_q, id=added["id"])
        assert info["state"] == "completed"
        assert info["childrenValues"] == py_values  # getChildrenValues() agrees
        assert info["counts"] == parent.get_dependencies_count() == \
            {"processed": 2, "unprocessed": 0, "ignored": 0, "failed": 0}
        assert info["dependencies"] == parent.get_dependencies()
        with FlowProducer(connection=redis_url) as flows:
            assert py_tree(flows.get_flow(added["id"], top_q)) == node_tree(added)


def test_python_flow_runs_on_node_workers(node, redis_url, namespace):
    top_q, step_q = f"orders-{namespace}", f"steps-{namespace}"
    with FlowProducer(connection=redis_url) as flows:
        tree = flows.add({"name": "order", "queue_name": top_q, "data": {"order": 2},
                          "opts": {"job_id": f"order-{namespace}"},
                          "children": [{"name": "charge", "queue_name": step_q,
                                        "data": {"amount": 3}},
                                       {"name": "ship", "queue_name": step_q,
                                        "data": {"to": "Lyon"},
                                        "opts": {"attempts": 2, "priority": 4}}]})
        assert node_tree(node("getFlow", queue=top_q, id=tree.job.id)) == py_tree(tree)
    steps = run_final(node("workFlow", queue=step_q, count=2))
    assert {i: s["returnvalue"]["echo"] for i, s in steps.items()} == \
        {c.job.id: c.job.data for c in tree.children}
    top = run_final(node("workFlow", queue=top_q, count=1))
    node_values = top[tree.job.id]["returnvalue"]["children"]
    with Queue(top_q, connection=redis_url) as queue:
        parent = queue.get_job(tree.job.id)
        assert parent.get_state() == "completed"
        assert parent.get_children_values() == node_values == {
            f"bull:{step_q}:{c.job.id}": {"echo": c.job.data, "children": {}, "ignored": {}}
            for c in tree.children}
        assert parent.returnvalue["echo"] == {"order": 2}


def test_fail_parent_on_failure_node_flow_python_workers(node, redis_url, namespace):
    top_q, step_q = f"orders-{namespace}", f"steps-{namespace}"
    added = node("addFlowTree", tree={
        "name": "order", "queue": top_q, "children": [
            {"name": "fail-charge", "queue": step_q, "opts": {"failParentOnFailure": True}},
            {"name": "ship", "queue": step_q}]})
    bad = f"bull:{step_q}:{added['children'][0]['id']}"
    ran: List[str] = []

    def top_handler(job: Job) -> Any:
        ran.append(job.id)
        return "must not run"

    with Queue(top_q, connection=redis_url) as top, \
            Worker(step_q, py_handler, connection=redis_url), \
            Worker(top_q, top_handler, connection=redis_url):
        wait_until(lambda: top.get_job_state(added["id"]) == "failed")
    assert ran == []
    info = node("flowInfo", queue=top_q, id=added["id"])
    assert info["state"] == "failed" and info["failedReason"] == f"child {bad} failed"
    assert info["dependencies"]["failed"] == [bad]
    assert info["counts"]["failed"] == 1


def test_fail_parent_on_failure_python_flow_node_workers(node, redis_url, namespace):
    top_q, step_q = f"orders-{namespace}", f"steps-{namespace}"
    with FlowProducer(connection=redis_url) as flows:
        tree = flows.add({"name": "order", "queue_name": top_q, "children": [
            {"name": "fail-charge", "queue_name": step_q, "data": {"message": "declined"},
             "opts": {"fail_parent_on_failure": True}}]})
    steps = run_final(node("workFlow", queue=step_q, count=1))
    assert steps[tree.children[0].job.id]["failedReason"] == "declined"
    top = run_final(node("workFlow", queue=top_q, count=1))
    bad = f"bull:{step_q}:{tree.children[0].job.id}"
    assert top[tree.job.id]["status"] == "failed"
    with Queue(top_q, connection=redis_url) as queue:
        parent = queue.get_job(tree.job.id)
        assert parent.get_state() == "failed"
        assert parent.failed_reason == top[tree.job.id]["failedReason"] == f"child {bad} failed"
        assert parent.get_dependencies()["failed"] == [bad]


def test_ignored_failures_agree(node, redis_url, namespace):
    top_q, step_q = f"orders-{namespace}", f"steps-{namespace}"
    with FlowProducer(connection=redis_url) as flows:
        tree = flows.add({"name": "order", "queue_name": top_q, "children": [
            {"name": "fail-optional", "queue_name": step_q, "data": {"message": "skipped"},
             "opts": {"ignore_dependency_on_failure": True}},
            {"name": "needed", "queue_name": step_q, "data": {"k": 1}}]})
    run_final(node("workFlow", queue=step_q, count=2))
    done = threading.Event()
    seen: Dict[str, Any] = {}

    def top_handler(job: Job) -> Any:
        seen["ignored"] = job.get_ignored_children_failures()
        seen["values"] = job.get_children_values()
        done.set()
        return "ok"

    with Worker(top_q, top_handler, connection=redis_url):
        assert done.wait(GUARD)
    failed, needed = (f"bull:{step_q}:{c.job.id}" for c in tree.children)
    assert seen["ignored"] == {failed: "skipped"}
    assert seen["values"] == {needed: {"echo": {"k": 1}, "children": {}, "ignored": {}}}
    info = node("flowInfo", queue=top_q, id=tree.job.id)
    assert info["ignored"] == seen["ignored"] and info["childrenValues"] == seen["values"]


def wait_order(redis_url: str, name: str) -> List[str]:
    """The job names of a queue's wait list in the order workers take them."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        ids = client.lrange(f"bull:{name}:wait", 0, -1)[::-1]    # taken from the right
        return [client.hget(f"bull:{name}:{i}", "name") for i in ids]
    finally:
        client.close()


def test_a_parent_made_ready_is_next_in_line_on_both_sides(node, redis_url, namespace):
    """Node's worker and Python's finish the same flow's last child, with jobs waiting
    in the parent's queue: both put the parent where it is taken next (BullMQ's RPUSH)."""
    names = {side: (f"top-{side}-{namespace}", f"steps-{side}-{namespace}")
             for side in ("node", "py")}
    with FlowProducer(connection=redis_url) as flows:
        for top_q, step_q in names.values():
            flows.add({"name": "order", "queue_name": top_q,
                       "children": [{"name": "charge", "queue_name": step_q}]})
            with Queue(top_q, connection=redis_url) as top:
                for i in range(3):
                    top.add(f"plain-{i}", {})
    run_final(node("workFlow", queue=names["node"][1], count=1))
    with Worker(names["py"][1], py_handler, connection=redis_url):
        wait_until(lambda: len(wait_order(redis_url, names["py"][0])) == 4,
                   what="the parent in wait")
    expected = ["order", "plain-0", "plain-1", "plain-2"]
    assert wait_order(redis_url, names["node"][0]) == expected      # BullMQ's own order
    assert wait_order(redis_url, names["py"][0]) == expected


# ---------------------------------------------------------------------------
# Job schedulers
# ---------------------------------------------------------------------------

def run_millis(job_id: str) -> int:
    return int(job_id.rsplit(":", 1)[1])


def test_python_scheduler_is_listed_and_run_by_node(node, redis_url, namespace):
    name = f"sched-{namespace}"
    with Queue(name, connection=redis_url) as queue:
        first = queue.upsert_job_scheduler(
            "heartbeat", every=0.3,
            template={"name": "beat", "data": {"from": "python"}, "opts": {"attempts": 2}})
        queue.upsert_job_scheduler("nightly", pattern="0 3 * * *", tz="Europe/Paris",
                                   template={"data": {"n": 1}})
        listed = {s["key"]: s for s in node("getJobSchedulers", queue=name)}
        assert set(listed) == {"heartbeat", "nightly"}
        beat = listed["heartbeat"]
        assert beat["name"] == "beat" and beat["every"] == 300
        assert beat["next"] == run_millis(first.id) and beat["iterationCount"] == 1
        assert beat["template"] == {"data": {"from": "python"}, "opts": {"attempts": 2}}
        nightly = listed["nightly"]
        assert nightly["pattern"] == "0 3 * * *" and nightly["tz"] == "Europe/Paris"
        assert nightly["template"] == {"data": {"n": 1}}
        assert node("removeJobScheduler", queue=name, id="nightly") == {"removed": True}

        runs = run_final(node("work", queue=name, count=3))
        assert len(runs) == 3
        assert all(r["name"] == "beat" and r["returnvalue"] == {"echo": {"from": "python"}}
                   for r in runs.values())
        millis = [run_millis(i) for i in runs]
        assert first.id in runs and len(set(millis)) == 3
        info = queue.get_job_scheduler("heartbeat")
        assert all(m % 300 == info.offset for m in millis)
        assert info.iteration_count >= 4  # Node's worker scheduled each next run
        assert queue.get_job_scheduler("nightly") is None


def test_python_cron_scheduler_runs_on_node(node, redis_url, namespace):
    name = f"sched-{namespace}"
    with Queue(name, connection=redis_url) as queue:
        queue.upsert_job_scheduler("every-second", pattern="* * * * * *")
        runs = run_final(node("work", queue=name, count=2))
        millis = [run_millis(i) for i in runs]
        assert len(set(millis)) == 2 and all(m % 1000 == 0 for m in millis)
        assert queue.get_job_scheduler("every-second").next > max(millis)


def test_node_scheduler_runs_on_python_workers(node, redis_url, namespace):
    name = f"sched-{namespace}"
    node("upsertJobScheduler", queue=name, id="n-every", repeat={"every": 250},
         template={"name": "tick", "data": {"from": "node"}, "opts": {"attempts": 3}})
    node("upsertJobScheduler", queue=name, id="n-cron", repeat={"pattern": "* * * * * *"},
         template={"name": "cron-tick"})
    with Queue(name, connection=redis_url) as queue:
        info = queue.get_job_scheduler("n-every")
        assert info.every == 0.25 and info.name == "tick"
        assert info.template["data"] == {"from": "node"}
        assert queue.get_job_scheduler("n-cron").pattern == "* * * * * *"
        runs: Dict[str, List[Job]] = {"tick": [], "cron-tick": []}
        lock = threading.Lock()

        def handler(job: Job) -> Any:
            with lock:
                runs[job.name].append(job)
            return job.data

        with Worker(name, handler, connection=redis_url, concurrency=2):
            wait_until(lambda: len(runs["tick"]) >= 3 and len(runs["cron-tick"]) >= 2)
        ticks = [run_millis(j.id) for j in runs["tick"]]
        assert len(set(ticks)) == len(ticks)
        assert all(m % 250 == queue.get_job_scheduler("n-every").offset for m in ticks)
        assert all(j.data == {"from": "node"} and j.opts["attempts"] == 3 for j in runs["tick"])
        crons = [run_millis(j.id) for j in runs["cron-tick"]]
        assert len(set(crons)) == len(crons) and all(m % 1000 == 0 for m in crons)
    listed = node("getJobScheduler", queue=name, id="n-every")
    assert listed["iterationCount"] >= 4  # Python's workers scheduled each next run


def test_python_and_node_upserting_one_id_make_one_series(node, redis_url, namespace):
    name = f"sched-{namespace}"
    with Queue(name, connection=redis_url) as queue:
        first = queue.upsert_job_scheduler("shared", every=0.3, template={"data": {"v": 1}})
        again = node("upsertJobScheduler", queue=name, id="shared", repeat={"every": 300},
                     template={"data": {"v": 2}})
        assert again["id"] == first.id  # Node replaced the pending run in place
        third = queue.upsert_job_scheduler("shared", every=0.3, template={"data": {"v": 3}})
        assert third.id == first.id
        assert queue.get_job_schedulers_count() == 1
        assert queue.get_job_counts("waiting", "delayed") == {"waiting": 1, "delayed": 0, "paused": 0}
        assert queue.get_job(first.id).data == {"v": 3}
        listed = node("getJobSchedulers", queue=name)
        assert [s["key"] for s in listed] == ["shared"]

        runs = run_final(node("work", queue=name, count=3))
        py_runs: List[str] = []
        with Worker(name, lambda j: py_runs.append(j.id), connection=redis_url):
            wait_until(lambda: len(py_runs) >= 2)
        millis = [run_millis(i) for i in list(runs) + py_runs]
        assert len(set(millis)) == len(millis) == 5
        offset = queue.get_job_scheduler("shared").offset
        assert all(m % 300 == offset for m in millis)
        assert all(r["returnvalue"] == {"echo": {"v": 3}} for r in runs.values())
