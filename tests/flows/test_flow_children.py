"""Children that fail, detach, or are added by a running parent (real Redis)."""
from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest

from orijs_sync import Job, Queue, QueueEvents, Worker, errors

from flow_helpers import Recorder, wait_until


def fail_named_fail(job: Job) -> Any:
    if job.name.startswith("fail"):
        raise RuntimeError(f"{job.name} broke")
    return {"ok": job.name}


def test_fail_parent_on_failure_fails_the_parent_without_running_it(flows, qn, redis_url):
    parent_handler = Recorder(lambda j: "must not run")
    node = flows.add({"name": "p", "queue_name": qn("p"), "children": [
        {"name": "fail-a", "queue_name": qn("c"), "opts": {"fail_parent_on_failure": True}},
        {"name": "slow", "queue_name": qn("c2")}]})
    bad_key = f"bull:{qn('c')}:{node.children[0].job.id}"
    with Queue(qn("p"), connection=redis_url) as parents, \
            QueueEvents(qn("p"), connection=redis_url) as events:
        with Worker(qn("c"), fail_named_fail, connection=redis_url), \
                Worker(qn("p"), parent_handler, connection=redis_url):
            with pytest.raises(errors.JobFailed) as info:
                node.job.wait_until_finished(events, timeout=20)
        assert info.value.failed_reason == f"child {bad_key} failed"
        parent = parents.get_job(node.job.id)
        assert parent.get_state() == "failed"
        assert parent_handler.count("p") == 0
        deps = parent.get_dependencies()
        assert deps["failed"] == [bad_key]
        assert deps["unprocessed"] == [f"bull:{qn('c2')}:{node.children[1].job.id}"]
        assert parent.get_dependencies_count("failed", "unprocessed") == {"failed": 1,
                                                                          "unprocessed": 1}


def test_failure_propagates_up_a_chain_of_fail_parent_children(flows, qn, redis_url):
    node = flows.add({"name": "top", "queue_name": qn("p"), "children": [
        {"name": "mid", "queue_name": qn("m"), "opts": {"fail_parent_on_failure": True},
         "children": [{"name": "fail-leaf", "queue_name": qn("c"),
                       "opts": {"fail_parent_on_failure": True}}]}]})
    with Queue(qn("p"), connection=redis_url) as top, \
            Worker(qn("c"), fail_named_fail, connection=redis_url), \
            Worker(qn("m"), fail_named_fail, connection=redis_url), \
            Worker(qn("p"), fail_named_fail, connection=redis_url):
        wait_until(lambda: top.get_job_state(node.job.id) == "failed")
        assert top.get_job(node.job.id).failed_reason == \
            f"child bull:{qn('m')}:{node.children[0].job.id} failed"


def test_a_plain_failed_child_keeps_its_parent_waiting(flows, qn, redis_url):
    node = flows.add({"name": "p", "queue_name": qn("p"),
                      "children": [{"name": "fail-x", "queue_name": qn("c")}]})
    with Queue(qn("c"), connection=redis_url) as children, \
            Queue(qn("p"), connection=redis_url) as parents:
        with Worker(qn("c"), fail_named_fail, connection=redis_url):
            wait_until(lambda: children.get_job_state(node.children[0].job.id) == "failed")
        assert parents.get_job_state(node.job.id) == "waiting-children"
        assert node.job.get_dependencies_count("unprocessed") == {"unprocessed": 1}


def test_continue_parent_on_failure_starts_the_parent_at_once(flows, qn, redis_url):
    seen: Dict[str, Any] = {}
    done = threading.Event()

    def parent(job: Job) -> Any:
        seen["ignored"] = job.get_ignored_children_failures()
        seen["counts"] = job.get_dependencies_count()
        done.set()
        return "went on"

    node = flows.add({"name": "p", "queue_name": qn("p"), "children": [
        {"name": "fail-x", "queue_name": qn("c"), "opts": {"continue_parent_on_failure": True}}]})
    with Worker(qn("c"), fail_named_fail, connection=redis_url), \
            Worker(qn("p"), parent, connection=redis_url):
        assert done.wait(20)
    key = f"bull:{qn('c')}:{node.children[0].job.id}"
    assert seen["ignored"] == {key: "fail-x broke"}
    assert seen["counts"] == {"processed": 0, "unprocessed": 0, "ignored": 1, "failed": 0}


def test_ignore_dependency_on_failure_waits_for_the_rest(flows, qn, redis_url):
    seen: Dict[str, Any] = {}
    done = threading.Event()

    def parent(job: Job) -> Any:
        seen["values"] = job.get_children_values()
        seen["ignored"] = job.get_ignored_children_failures()
        seen["deps"] = job.get_dependencies()
        done.set()
        return "ok"

    release = threading.Event()

    def child(job: Job) -> Any:
        if job.name == "slow":
            release.wait(20)
        return fail_named_fail(job)

    node = flows.add({"name": "p", "queue_name": qn("p"), "children": [
        {"name": "fail-x", "queue_name": qn("c"), "opts": {"ignore_dependency_on_failure": True}},
        {"name": "slow", "queue_name": qn("c")}]})
    failed_key = f"bull:{qn('c')}:{node.children[0].job.id}"
    slow_key = f"bull:{qn('c')}:{node.children[1].job.id}"
    with Queue(qn("p"), connection=redis_url) as parents, \
            Worker(qn("c"), child, connection=redis_url, concurrency=2), \
            Worker(qn("p"), parent, connection=redis_url):
        wait_until(lambda: node.job.get_ignored_children_failures() != {})
        assert parents.get_job_state(node.job.id) == "waiting-children"  # slow still pending
        release.set()
        assert done.wait(20)
    assert seen["values"] == {slow_key: {"ok": "slow"}}
    assert seen["ignored"] == {failed_key: "fail-x broke"}
    assert seen["deps"]["ignored"] == {failed_key: "fail-x broke"}
    assert seen["deps"]["failed"] == []


def test_remove_dependency_on_failure_forgets_the_child(flows, qn, redis_url):
    seen: Dict[str, Any] = {}
    done = threading.Event()

    def parent(job: Job) -> Any:
        seen["counts"] = job.get_dependencies_count()
        seen["values"] = job.get_children_values()
        done.set()

    node = flows.add({"name": "p", "queue_name": qn("p"), "children": [
        {"name": "fail-x", "queue_name": qn("c"), "opts": {"remove_dependency_on_failure": True}},
        {"name": "fine", "queue_name": qn("c")}]})
    with Worker(qn("c"), fail_named_fail, connection=redis_url), \
            Worker(qn("p"), parent, connection=redis_url):
        assert done.wait(20)
    assert seen["counts"] == {"processed": 1, "unprocessed": 0, "ignored": 0, "failed": 0}
    assert list(seen["values"].values()) == [{"ok": "fine"}]


def test_remove_child_dependency_releases_the_parent(flows, qn, redis_url, r):
    node = flows.add({"name": "p", "queue_name": qn("p"), "children": [
        {"name": "a", "queue_name": qn("c")}, {"name": "b", "queue_name": qn("c")}]})
    with Queue(qn("c"), connection=redis_url) as children, \
            Queue(qn("p"), connection=redis_url) as parents:
        a, b = (children.get_job(n.job.id) for n in node.children)
        assert a.remove_child_dependency() is True
        assert a.parent_key is None and "parentKey" not in r.hgetall(a.key)
        assert parents.get_job_state(node.job.id) == "waiting-children"
        assert a.remove_child_dependency() is False
        assert b.remove_child_dependency() is True
        assert parents.get_job_state(node.job.id) == "waiting"
        assert node.job.get_dependencies_count("unprocessed") == {"unprocessed": 0}
        ghost = Job(children, "no-such-job", "x", {})
        with pytest.raises(errors.JobNotFound):
            ghost.remove_child_dependency()


def test_a_handler_waits_for_children_it_added_itself(flows, qn, redis_url):
    runs: List[Dict[str, Any]] = []
    release = threading.Event()

    def parent(job: Job) -> Any:
        values = job.get_children_values()
        runs.append(values)
        if not values:
            flows.add_bulk([{"name": "step", "queue_name": qn("c"), "data": {"n": n},
                             "opts": {"parent": job}} for n in (1, 2)])
            assert job.move_to_waiting_children() is True
            return None  # the worker leaves the job in waiting-children
        return sum(values.values())

    def child(job: Job) -> Any:
        release.wait(20)
        return job.data["n"] * 10

    with QueueEvents(qn("p"), connection=redis_url) as events, \
            Queue(qn("p"), connection=redis_url) as parents:
        job = parents.add("p", {})
        with Worker(qn("c"), child, connection=redis_url, concurrency=2), \
                Worker(qn("p"), parent, connection=redis_url):
            wait_until(lambda: parents.get_job_state(job.id) == "waiting-children")
            assert job.get_dependencies_count("unprocessed") == {"unprocessed": 2}
            release.set()
            assert job.wait_until_finished(events, timeout=20) == 30
    assert len(runs) == 2 and runs[0] == {}


def test_move_to_waiting_children_with_nothing_pending_goes_on(qn, redis_url):
    answers: List[Any] = []

    def handler(job: Job) -> Any:
        answers.append(job.move_to_waiting_children())
        return "finished anyway"

    with Queue(qn("p"), connection=redis_url) as queue, \
            QueueEvents(qn("p"), connection=redis_url) as events:
        job = queue.add("lonely", {})
        with Worker(qn("p"), handler, connection=redis_url):
            assert job.wait_until_finished(events, timeout=20) == "finished anyway"
        assert answers == [False]
        with pytest.raises(errors.InvalidStateError):
            queue.get_job(job.id).move_to_waiting_children()


def test_waiting_children_error_from_a_handler_and_a_specific_child(flows, qn, redis_url):
    release = threading.Event()
    runs: List[str] = []

    def parent(job: Job) -> Any:
        runs.append(job.id)
        if len(runs) == 1:
            child = flows.add({"name": "child", "queue_name": qn("c"),
                               "opts": {"parent": job}}).job
            if job.move_to_waiting_children(child):
                raise errors.WaitingChildrenError()
        return "second run"

    def child(job: Job) -> Any:
        release.wait(20)
        return "c"

    with Queue(qn("p"), connection=redis_url) as parents, \
            QueueEvents(qn("p"), connection=redis_url) as events:
        job = parents.add("p", {})
        with Worker(qn("c"), child, connection=redis_url), \
                Worker(qn("p"), parent, connection=redis_url):
            wait_until(lambda: parents.get_job_state(job.id) == "waiting-children")
            release.set()
            assert job.wait_until_finished(events, timeout=20) == "second run"
        assert len(runs) == 2


def test_queue_add_with_a_parent_links_the_child(redis_url, namespace):
    name = f"addparent-{namespace}"
    with Queue(name, connection=redis_url) as q:
        parent = q.add("parent", {}, delay=60)   # any existing job can be given children
        child = q.add("child", {"n": 1}, parent=parent)
        assert q.get_job(child.id).parent_key == parent.key
        assert q.client.smembers(parent.key + ":dependencies") == {child.key}
        with Worker(name, lambda j: j.data.get("n"), connection=redis_url):
            wait_until(lambda: q.get_job_state(child.id) == "completed")
        assert q.get_job(parent.id).get_children_values() == {child.key: 1}


@pytest.mark.parametrize("chained", [False, True])
def test_a_worker_that_asks_gets_the_children_values_with_the_job(flows, qn, redis_url,
                                                                   chained):
    """A worker asking for children values (as the workflow provider's do) gets them in
    the reply that took the job, whether moveToActive took it or the finishing call of
    its last child (``chained``: child and parent in one queue); a worker that does not
    ask gets none (``Job._children_values`` then reads Redis)."""
    child_queue = qn("p") if chained else qn("c")
    node = flows.add({"name": "p", "queue_name": qn("p"), "children": [
        {"name": f"c{i}", "queue_name": child_queue} for i in range(3)]})
    seen: Dict[str, Any] = {}

    def handler(job: Job) -> Any:
        if job.name == "p":
            seen["fetched"] = job._fetched_children
            seen["values"] = job._children_values()
            seen["read"] = job.get_children_values()
        return {"from": job.name}

    with QueueEvents(qn("p"), connection=redis_url) as events:
        workers = [Worker(qn("p"), handler, connection=redis_url)]
        if not chained:
            workers.append(Worker(qn("c"), handler, connection=redis_url))
        workers[0]._fetch_children = True
        for w in workers:
            w.start()
        try:
            node.job.wait_until_finished(events, timeout=20)
        finally:
            for w in workers:
                w.close()
    expected = {f"bull:{child_queue}:{c.job.id}": {"from": c.job.name} for c in node.children}
    assert seen["read"] == expected
    assert seen["values"] == expected
    assert seen["fetched"] is not None and set(seen["fetched"]) == set(expected)


def test_a_worker_that_does_not_ask_reads_children_values_from_redis(flows, qn, redis_url):
    node = flows.add({"name": "p", "queue_name": qn("p"), "children": [
        {"name": "c", "queue_name": qn("c")}]})
    seen: Dict[str, Any] = {}

    def handler(job: Job) -> Any:
        if job.name == "p":
            seen["fetched"] = job._fetched_children
            seen["values"] = job._children_values()
        return "v"

    with QueueEvents(qn("p"), connection=redis_url) as events, \
            Worker(qn("c"), handler, connection=redis_url), \
            Worker(qn("p"), handler, connection=redis_url):
        node.job.wait_until_finished(events, timeout=20)
    assert seen == {"fetched": None,
                    "values": {f"bull:{qn('c')}:{node.children[0].job.id}": "v"}}
