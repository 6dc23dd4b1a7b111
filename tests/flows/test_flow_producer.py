"""FlowProducer: adding trees in BullMQ's layout, running them, reading them back (real Redis)."""
from __future__ import annotations

import json
import threading
import uuid
from typing import Any, Dict

import pytest

from orijs_sync import FlowProducer, Job, JobNode, Queue, Worker, errors

from flow_helpers import keys_of, wait_until


def test_add_writes_bullmq_layout(flows, qn, r):
    parent_q, child_q = qn("orders"), qn("steps")
    node = flows.add({"name": "order", "queue_name": parent_q, "data": {"order": 7},
                      "children": [{"name": "charge", "queue_name": child_q, "data": {"n": 1},
                                    "opts": {"fail_parent_on_failure": True, "attempts": 3}},
                                   {"name": "ship", "queue_name": child_q, "data": {"n": 2}}]})
    assert isinstance(node, JobNode) and len(node.children) == 2
    parent = node.job
    uuid.UUID(parent.id)  # ids are decided before writing: random UUIDs, as BullMQ makes them
    parent_key = f"bull:{parent_q}:{parent.id}"
    assert r.zscore(f"bull:{parent_q}:waiting-children", parent.id) is not None
    child_keys = {f"bull:{child_q}:{c.job.id}" for c in node.children}
    assert r.smembers(f"{parent_key}:dependencies") == child_keys
    assert set(r.lrange(f"bull:{child_q}:wait", 0, -1)) == {c.job.id for c in node.children}

    charge = r.hgetall(f"bull:{child_q}:{node.children[0].job.id}")
    assert charge["parentKey"] == parent_key
    assert json.loads(charge["parent"]) == {"id": parent.id, "queueKey": f"bull:{parent_q}",
                                            "fpof": True}
    opts = json.loads(charge["opts"])
    assert opts["parent"] == {"id": parent.id, "queue": f"bull:{parent_q}"}
    assert opts["fpof"] is True and opts["attempts"] == 3 and opts["jobId"] == node.children[0].job.id
    ship = r.hgetall(f"bull:{child_q}:{node.children[1].job.id}")
    assert json.loads(ship["parent"]) == {"id": parent.id, "queueKey": f"bull:{parent_q}"}
    assert node.children[0].job.parent_key == parent_key
    assert "parentKey" not in r.hgetall(parent_key)


def test_parent_runs_after_children_across_queues_and_depths(flows, qn, redis_url):
    top_q, mid_q, leaf_q = qn("top"), qn("mid"), qn("leaf")
    seen: Dict[str, Any] = {}
    done = threading.Event()

    def parent_handler(job: Job) -> Any:
        seen[job.name] = {"values": job.get_children_values(), "deps": job.get_dependencies(),
                          "counts": job.get_dependencies_count()}
        if job.name == "top":
            done.set()
        return {"name": job.name, "sum": sum(v["n"] for v in job.get_children_values().values())}

    node = flows.add({
        "name": "top", "queue_name": top_q, "data": {},
        "children": [
            {"name": "leaf-a", "queue_name": leaf_q, "data": {"n": 1}},
            {"name": "mid", "queue_name": mid_q, "data": {},
             "children": [{"name": "leaf-b", "queue_name": leaf_q, "data": {"n": 2}},
                          {"name": "leaf-c", "queue_name": leaf_q, "data": {"n": 3}}]},
        ]})
    mid = node.children[1]
    with Queue(top_q, connection=redis_url) as top, Queue(mid_q, connection=redis_url) as midq:
        assert top.get_job_state(node.job.id) == "waiting-children"
        assert midq.get_job_state(mid.job.id) == "waiting-children"
        with Worker(leaf_q, lambda j: {"n": j.data["n"]}, connection=redis_url), \
                Worker(mid_q, lambda j: {"n": parent_handler(j)["sum"]}, connection=redis_url), \
                Worker(top_q, parent_handler, connection=redis_url):
            assert done.wait(20)
            wait_until(lambda: top.get_job_state(node.job.id) == "completed")
        leaf_a = node.children[0].job
        assert seen["mid"]["values"] == {f"bull:{leaf_q}:{c.job.id}": {"n": c.job.data["n"]}
                                         for c in mid.children}
        assert seen["top"]["values"] == {f"bull:{leaf_q}:{leaf_a.id}": {"n": 1},
                                         f"bull:{mid_q}:{mid.job.id}": {"n": 5}}
        assert seen["top"]["deps"] == {"processed": seen["top"]["values"], "unprocessed": [],
                                       "ignored": {}, "failed": []}
        assert seen["top"]["counts"] == {"processed": 2, "unprocessed": 0, "ignored": 0,
                                         "failed": 0}
        assert top.get_job(node.job.id).returnvalue == {"name": "top", "sum": 6}


def test_parent_moves_to_delayed_or_prioritized_per_its_options(flows, qn, redis_url):
    parent_q, child_q = qn("parents"), qn("kids")
    delayed = flows.add({"name": "later", "queue_name": parent_q, "opts": {"delay": 3600},
                         "children": [{"name": "c", "queue_name": child_q}]})
    ranked = flows.add({"name": "ranked", "queue_name": parent_q, "opts": {"priority": 5},
                        "children": [{"name": "c", "queue_name": child_q}]})
    with Queue(parent_q, connection=redis_url) as parents:
        with Worker(child_q, lambda j: "ok", connection=redis_url):
            wait_until(lambda: parents.get_job_state(delayed.job.id) == "delayed"
                       and parents.get_job_state(ranked.job.id) == "prioritized")
        assert parents.get_job_counts("waiting-children")["waiting-children"] == 0


def test_adding_the_same_tree_twice_adds_nothing_new(flows, qn, r, namespace):
    def tree() -> Dict[str, Any]:
        return {"name": "p", "queue_name": qn("p"), "data": {}, "opts": {"job_id": "order-1"},
                "children": [{"name": "c", "queue_name": qn("c"), "opts": {"job_id": "step-1"},
                              "children": [{"name": "g", "queue_name": qn("c"),
                                            "opts": {"job_id": "step-1-a"}}]}]}

    first = flows.add(tree())
    before = {key: r.type(key) for key in keys_of(r, namespace) if not key.endswith(":events")}
    sizes = {key: r.scard(key) for key in before if key.endswith(":dependencies")}
    second = flows.add(tree())
    assert [n.job.id for n in first.walk()] == [n.job.id for n in second.walk()] \
        == ["order-1", "step-1", "step-1-a"]
    after = {key: r.type(key) for key in keys_of(r, namespace) if not key.endswith(":events")}
    assert after == before
    assert {key: r.scard(key) for key in sizes} == sizes
    assert r.llen(f"bull:{qn('c')}:wait") == 1
    assert r.zcard(f"bull:{qn('c')}:waiting-children") == 1


def test_a_bad_node_anywhere_writes_nothing(flows, qn, r, namespace):
    bad_trees = [
        {"name": "p", "queue_name": qn("p"), "children": [
            {"name": "c", "queue_name": qn("c"), "data": {"when": object()}}]},
        {"name": "p", "queue_name": qn("p"), "children": [
            {"name": "c", "queue_name": qn("c"), "opts": {"priority": -1}}]},
        {"name": "p", "queue_name": qn("p"), "children": [
            {"name": "c", "queue_name": qn("c"),
             "opts": {"fail_parent_on_failure": True, "ignore_dependency_on_failure": True}}]},
        {"name": "p", "queue_name": qn("p"), "children": [{"queue_name": qn("c")}]},
        {"name": "p", "queue_name": qn("p"), "children": [{"name": "c", "queue": qn("c")}]},
        {"name": "p", "queue_name": qn("p"), "children": [
            {"name": "c", "queue_name": qn("c"), "opts": {"job_id": "42"}}]},
        {"name": "p", "queue_name": qn("p"), "children": [
            {"name": "c", "queue_name": qn("c"), "opts": {"deduplication": {"id": "d"}}}]},
        {"name": "p", "queue_name": qn("p"), "children": [
            {"name": "c", "queue_name": qn("c"), "opts": {"parent": {"id": "x", "queue": "bull:y"}}}]},
    ]
    for tree in bad_trees:
        with pytest.raises((ValueError, TypeError)):
            flows.add_bulk([{"name": "fine", "queue_name": qn("p")}, tree])
    assert keys_of(r, namespace) == []


def test_add_bulk_adds_every_tree_in_one_transaction(flows, qn, redis_url):
    nodes = flows.add_bulk([
        {"name": f"p{i}", "queue_name": qn("p"), "data": {"i": i},
         "children": [{"name": f"c{i}", "queue_name": qn("c"), "data": {"i": i}}]}
        for i in range(5)])
    assert [n.job.name for n in nodes] == [f"p{i}" for i in range(5)]
    with Queue(qn("p"), connection=redis_url) as parents, \
            Queue(qn("c"), connection=redis_url) as children:
        assert parents.get_job_counts("waiting-children")["waiting-children"] == 5
        assert children.get_job_counts("waiting")["waiting"] == 5
    assert flows.add_bulk([]) == []


def test_get_flow_reads_the_tree_back_with_depth_and_max_children(flows, qn, redis_url):
    node = flows.add({"name": "root", "queue_name": qn("p"), "children": [
        {"name": f"kid{i}", "queue_name": qn("c"), "children": [
            {"name": f"grandkid{i}", "queue_name": qn("g")}]} for i in range(3)]})
    tree = flows.get_flow(node.job.id, qn("p"))
    assert tree is not None and tree.job.name == "root"
    assert sorted(c.job.name for c in tree.children) == ["kid0", "kid1", "kid2"]
    assert sorted(g.job.name for c in tree.children for g in c.children) == \
        ["grandkid0", "grandkid1", "grandkid2"]
    assert all(c.children == [] for c in flows.get_flow(node.job.id, qn("p"), depth=2).children)
    assert flows.get_flow(node.job.id, qn("p"), depth=1).children == []
    assert len(flows.get_flow(node.job.id, qn("p"), max_children=2).children) == 2
    assert flows.get_flow("missing", qn("p")) is None
    with pytest.raises(ValueError):
        flows.get_flow(node.job.id, qn("p"), depth=0)

    # Finished children are still found (through the parent's processed hash).
    with Worker(qn("g"), lambda j: 1, connection=redis_url), \
            Worker(qn("c"), lambda j: 2, connection=redis_url), \
            Queue(qn("p"), connection=redis_url) as parents:
        wait_until(lambda: parents.get_job_state(node.job.id) == "waiting")
    again = flows.get_flow(node.job.id, qn("p"))
    assert sorted(c.job.name for c in again.children) == ["kid0", "kid1", "kid2"]
    assert all(c.job.returnvalue == 2 for c in again.children)


def test_root_parent_option_attaches_a_flow_to_an_existing_job(flows, qn, redis_url, r):
    with Queue(qn("p"), connection=redis_url) as parents:
        host = flows.add({"name": "host", "queue_name": qn("p"),
                          "children": [{"name": "first", "queue_name": qn("c")}]}).job
        extra = flows.add({"name": "extra", "queue_name": qn("c"),
                           "opts": {"parent": host, "job_id": "extra-1"}})
        assert extra.job.parent_key == f"bull:{qn('p')}:{host.id}"
        assert f"bull:{qn('c')}:extra-1" in r.smembers(f"bull:{qn('p')}:{host.id}:dependencies")
        with pytest.raises(errors.ScriptError, match="parent job does not exist"):
            flows.add({"name": "orphan", "queue_name": qn("c"),
                       "opts": {"parent": {"id": "nope", "queue": f"bull:{qn('p')}"}}})
        with Worker(qn("c"), lambda j: j.name, connection=redis_url):
            wait_until(lambda: parents.get_job_state(host.id) == "waiting")
        assert set(parents.get_job(host.id).get_children_values().values()) == {"first", "extra"}


def test_custom_prefix(redis_url, qn, r):
    with FlowProducer(connection=redis_url, prefix="custom") as flows:
        node = flows.add({"name": "p", "queue_name": qn("p"),
                          "children": [{"name": "c", "queue_name": qn("c")}]})
        with Worker(qn("c"), lambda j: "x", connection=redis_url, prefix="custom"):
            wait_until(lambda: r.lrange(f"custom:{qn('p')}:wait", 0, -1) == [node.job.id])
        key = f"custom:{qn('c')}:{node.children[0].job.id}"
        assert node.job.get_children_values() == {key: "x"}


def test_a_tree_refused_part_way_writes_nothing(flows, qn, r, namespace):
    """Item 8: a child id held under another parent used to leave the new parent (stuck in
    waiting-children) and the children before it written."""
    first = flows.add({"name": "p1", "queue_name": qn("p"), "opts": {"job_id": "p1"},
                       "children": [{"name": "c", "queue_name": qn("c"),
                                     "opts": {"job_id": "shared"}}]})
    before = sorted(keys_of(r, namespace))
    events_before = {k: r.xlen(k) for k in before if k.endswith(":events")}
    with pytest.raises(errors.ScriptError, match="another parent") as excinfo:
        flows.add_bulk([
            {"name": "lone", "queue_name": qn("p"), "opts": {"job_id": "lone"}},
            {"name": "p2", "queue_name": qn("p"), "opts": {"job_id": "p2"},
             "children": [{"name": "new", "queue_name": qn("c"), "opts": {"job_id": "new"}},
                          {"name": "c", "queue_name": qn("c"), "opts": {"job_id": "shared"}}]}])
    assert excinfo.value.code == -7
    assert sorted(keys_of(r, namespace)) == before
    assert {k: r.xlen(k) for k in events_before} == events_before
    assert r.zrange(f"bull:{qn('p')}:waiting-children", 0, -1) == [first.job.id]
    with pytest.raises(errors.ScriptError, match="does not exist"):
        flows.add({"name": "orphan", "queue_name": qn("c"), "opts": {"parent": {
            "id": "nope", "queue": f"bull:{qn('p')}"}},
            "children": [{"name": "kid", "queue_name": qn("c")}]})
    assert sorted(keys_of(r, namespace)) == before


def test_flows_attach_whole_while_another_client_writes_their_parent(flows, qn, redis_url, r):
    """One script per flow: another writer on the parent's hash neither fails nor splits
    the flows attached to it."""
    done = []
    with Queue(qn("p"), connection=redis_url) as parents:
        host = parents.add("host", {})

        def add_many():
            for i in range(20):
                done.append(flows.add({"name": "sub", "queue_name": qn("c"),
                                       "opts": {"parent": host, "job_id": f"sub{i}"},
                                       "children": [{"name": "leaf", "queue_name": qn("c")}]}))

        adder = threading.Thread(target=add_many)
        adder.start()
        n = 0
        while adder.is_alive():
            n += 1
            r.hset(host.key, "noise", n)       # another writer on a watched key
        adder.join(30)
    assert len(done) == 20
    deps = r.smembers(f"{host.key}:dependencies")
    assert deps == {f"bull:{qn('c')}:sub{i}" for i in range(20)}
    for node in done:
        assert r.scard(f"{node.job.key}:dependencies") == 1


@pytest.mark.parametrize("bounded", [False, True])
def test_a_side_key_goes_with_the_flow_and_its_failure_is_only_logged(
        redis_url, qn, r, caplog, bounded):
    """The workflow provider's flow registry ``SET`` rides in the flow's own round
    trip (on a leased connection; with ``max_connections`` or on a cluster, through the
    client, just before): written
    with the flow; refused, it is logged, the flow is added, and the connection's
    replies stay in step (the next add reads its own reply, not the side's)."""
    cluster = isinstance(redis_url, dict)         # tests/cluster runs this suite again
    options: Dict[str, Any] = dict(redis_url) if cluster else {"url": redis_url}
    if bounded and not cluster:
        options["max_connections"] = 2
    side_key = f"side-{qn('k')}"
    with FlowProducer(connection=options) as producer:
        tree = {"name": "p", "queue_name": qn("side"), "children": [
            {"name": "c", "queue_name": qn("side")}]}
        with producer._side_command(("SET", side_key, "v", "EX", 900)):
            node = producer.add(tree)
        assert r.get(side_key) == "v" and 0 < r.ttl(side_key) <= 900
        with caplog.at_level("WARNING", logger="orijs_sync.connection"):
            with producer._side_command(("SET", side_key, "w", "EX", -1)):
                refused = producer.add(tree)
        assert "could not write side key" in caplog.text and side_key in caplog.text
        assert r.get(side_key) == "v"
        later = producer.add(tree)        # no side command left over for the next write
        assert r.get(side_key) == "v"
        ids = {n.job.id for n in (node, refused, later)}
        assert len(ids) == 3
        assert all(r.exists(f"bull:{qn('side')}:{i}") for i in ids)
