"""Queue-wide limits and bulk actions shared by orijs_sync and a real Node BullMQ, both ways:
global concurrency and rate limit set by one side, read and obeyed by the other (and a
Node Worker and a Python Worker sharing one limit), the limiter key, retryJobs and
promoteJobs on jobs the other side added, a tree removed with its children, a parent's
unprocessed children and ignored failures, and a flow's queues_options.

Node side: tests/interop/node/driver.js (limits, setLimits, workTimed, retryJobs,
promoteJobs, removeJob, removeUnprocessedChildren, failedChildrenValues; add, addBulk,
addFlowTree, work, getJob, counts, flowInfo). Timeouts are failure guards only.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from orijs_sync import FlowProducer, Queue, Worker
from orijs_sync.testing import wait_until

GUARD = 30.0


@pytest.fixture
def q(redis_url: str, namespace: str) -> Iterator[Queue]:
    queue = Queue(f"limits-{namespace}", connection=redis_url)
    yield queue
    queue.close()


@pytest.fixture
def kids(redis_url: str, namespace: str) -> Iterator[Queue]:
    queue = Queue(f"kids-{namespace}", connection=redis_url)
    yield queue
    queue.close()


@pytest.fixture
def flows(redis_url: str) -> Iterator[FlowProducer]:
    producer = FlowProducer(connection=redis_url)
    yield producer
    producer.close()


class Timed:
    """A Python handler that sleeps and records its run as (start, end) in epoch ms."""

    def __init__(self, sleep: float) -> None:
        self.sleep = sleep
        self.lock = threading.Lock()
        self.runs: List[Tuple[float, float]] = []

    def __call__(self, job: Any) -> str:
        start = time.time() * 1000
        time.sleep(self.sleep)
        with self.lock:
            self.runs.append((start, time.time() * 1000))
        return "python"


def most_at_once(runs: List[Tuple[float, float]], slack_ms: float = 2.0) -> int:
    """How many of the (start, end) runs overlapped at most (``slack_ms`` for the clocks'
    rounding: Node's Date.now() is whole ms)."""
    points = sorted([(s + slack_ms, 1) for s, _ in runs] + [(e, -1) for _, e in runs],
                    key=lambda p: (p[0], p[1]))
    most = running = 0
    for _, step in points:
        running += step
        most = max(most, running)
    return most


def node_runs(reply: Dict[str, Any]) -> List[Tuple[float, float]]:
    assert not reply["timedOut"], reply
    return [(run["start"], run["end"]) for run in reply["runs"]]


def add_jobs(queue: Queue, n: int, name: str = "x") -> List[str]:
    return [j.id for j in queue.add_bulk([{"name": name, "data": {"i": i}} for i in range(n)])]


# -- global concurrency ---------------------------------------------------------------

def test_node_sets_a_global_concurrency_that_a_python_worker_obeys(node, q, redis_url):
    assert node("setLimits", queue=q.name, concurrency=1)["concurrency"] == 1
    assert q.get_global_concurrency() == 1
    add_jobs(q, 5)
    handler = Timed(0.1)
    with Worker(q.name, handler, connection=redis_url, concurrency=4, drain_delay=0.2):
        wait_until(lambda: q.get_job_counts("completed")["completed"] == 5, GUARD)
    assert len(handler.runs) == 5 and most_at_once(handler.runs) == 1


def test_python_sets_a_global_concurrency_that_node_reads_and_obeys(node, q):
    q.set_global_concurrency(1)
    assert node("limits", queue=q.name)["concurrency"] == 1
    add_jobs(q, 5)
    runs = node_runs(node("workTimed", queue=q.name, count=5, concurrency=4, sleepMs=100))
    assert len(runs) == 5 and most_at_once(runs) == 1
    assert q.remove_global_concurrency() is True
    assert node("limits", queue=q.name)["concurrency"] is None


def test_a_node_worker_and_a_python_worker_share_the_global_concurrency(node, q, redis_url,
                                                                      ready_file):
    """Node takes the one place first and keeps it for three jobs or so; the Python worker
    (four threads) started meanwhile waits, then runs the rest one at a time."""
    q.set_global_concurrency(1)
    add_jobs(q, 7)
    stop = ready_file.with_name("stop")
    running = node.start("workTimed", queue=q.name, count=3, concurrency=4, sleepMs=300,
                         readyFile=str(ready_file), workTimeout=25)
    running.wait_for_file(ready_file)
    handler = Timed(0.1)
    with Worker(q.name, handler, connection=redis_url, concurrency=4, drain_delay=0.2):
        wait_until(lambda: q.get_job_counts("completed")["completed"] == 7, GUARD)
    Path(stop).touch()
    from_node = node_runs(running.result())
    assert from_node and handler.runs, (from_node, handler.runs)
    assert len(from_node) + len(handler.runs) == 7
    assert most_at_once(from_node + handler.runs) == 1


# -- global rate limit ----------------------------------------------------------------

def test_node_sets_a_global_rate_limit_that_a_python_worker_obeys(node, q, redis_url):
    reply = node("setLimits", queue=q.name, max=1, duration=400)
    assert reply["rateLimit"] == {"max": 1, "duration": 400}
    assert q.get_global_rate_limit() == {"max": 1, "duration": 0.4}
    add_jobs(q, 4)
    handler = Timed(0)
    with Worker(q.name, handler, connection=redis_url, concurrency=4):
        wait_until(lambda: q.get_job_counts("completed")["completed"] == 4, GUARD)
    starts = sorted(s for s, _ in handler.runs)
    assert starts[3] - starts[0] >= 1100            # one per 400 ms
    assert node("setLimits", queue=q.name, removeRateLimit=True)["rateLimit"] is None
    assert q.get_global_rate_limit() is None


def test_python_sets_a_global_rate_limit_that_node_reads_and_obeys(node, q):
    q.set_global_rate_limit(1, 0.4)
    assert node("limits", queue=q.name)["rateLimit"] == {"max": 1, "duration": 400}
    add_jobs(q, 4)
    runs = node_runs(node("workTimed", queue=q.name, count=4, concurrency=4, sleepMs=0))
    starts = sorted(s for s, _ in runs)
    assert len(starts) == 4 and starts[3] - starts[0] >= 1100


def test_the_limiter_key_is_shared_both_ways(node, q):
    q.rate_limit(60)
    assert 30_000 < node("limits", queue=q.name)["ttl"] <= 60_000
    assert 30_000 < node("limits", queue=q.name, maxJobs=10)["ttl"] <= 60_000
    node("setLimits", queue=q.name, removeRateLimitKey=True)
    assert q.get_rate_limit_ttl() == 0.0
    node("setLimits", queue=q.name, rateLimitMs=60_000)
    assert 30.0 < q.get_rate_limit_ttl() <= 60.0
    assert q.remove_rate_limit_key() is True
    assert node("limits", queue=q.name)["ttl"] == -2        # Node's "no key"


# -- retryJobs / promoteJobs ------------------------------------------------------------

def test_python_promotes_delayed_jobs_node_added_and_node_runs_them(node, q):
    ids = node("addBulk", queue=q.name, jobs=[{"name": "x", "data": {"i": i},
                                               "opts": {"delay": 60_000}} for i in range(4)])
    assert q.promote_jobs(count=3) == 4
    counts = node("counts", queue=q.name, types=["delayed", "waiting"])
    assert (counts["delayed"], counts["waiting"]) == (0, 4)
    reply = node("work", queue=q.name, count=4)
    assert sorted(r["id"] for r in reply["results"] if r["status"] == "completed") == sorted(ids)


def test_node_promotes_delayed_jobs_python_added_and_python_runs_them(node, q, redis_url):
    jobs = [q.add("x", {"i": i}, delay=60) for i in range(3)]
    assert node("promoteJobs", queue=q.name, count=2)["delayed"] == 0
    assert all(q.get_job_state(j.id) == "waiting" for j in jobs)
    with Worker(q.name, lambda j: j.data["i"], connection=redis_url):
        wait_until(lambda: all(q.get_job_state(j.id) == "completed" for j in jobs), GUARD)


def test_python_retries_jobs_node_failed_and_python_completes_them(node, q, redis_url):
    ids = node("addBulk", queue=q.name, jobs=[{"name": "fail", "data": {"i": i}}
                                              for i in range(3)])
    node("work", queue=q.name, count=3)
    assert q.get_job_counts("failed")["failed"] == 3
    assert q.retry_jobs() == 3
    with Worker(q.name, lambda j: "second run", connection=redis_url):
        wait_until(lambda: q.get_job_counts("completed")["completed"] == 3, GUARD)
    for job_id in ids:
        fields = node("getJob", queue=q.name, id=job_id)
        assert (fields["state"], fields["returnvalue"], fields["failedReason"]) == \
            ("completed", "second run", None)


def test_node_retries_jobs_python_failed_and_completed(node, q, redis_url):
    ids = add_jobs(q, 3, "x")

    def failing(job):
        raise ValueError("python failed")
    with Worker(q.name, failing, connection=redis_url):
        wait_until(lambda: q.get_job_counts("failed")["failed"] == 3, GUARD)
    assert node("retryJobs", queue=q.name)["failed"] == 0
    reply = node("work", queue=q.name, count=3)
    assert sorted(r["id"] for r in reply["results"] if r["status"] == "completed") == sorted(ids)
    assert node("retryJobs", queue=q.name, state="completed", count=2)["completed"] == 0
    assert q.get_job_counts("waiting")["waiting"] == 3
    assert q.get_job(ids[0]).returnvalue is None


# -- remove with children, unprocessed children, ignored failures -------------------------

def node_tree(q: Queue, kids: Queue) -> Dict[str, Any]:
    return {"name": "p", "queue": q.name, "children": [
        {"name": "c1", "queue": kids.name},
        {"name": "c2", "queue": kids.name, "children": [{"name": "g", "queue": q.name}]}]}


def test_python_removes_a_node_tree_with_its_children(node, q, kids):
    added = node("addFlowTree", tree=node_tree(q, kids))
    c1, c2 = added["children"]
    assert q.remove(added["id"]) is True
    assert node("getJob", queue=q.name, id=added["id"]) is None
    assert node("getJob", queue=kids.name, id=c1["id"]) is None
    assert node("getJob", queue=q.name, id=c2["children"][0]["id"]) is None


def test_node_removes_a_python_tree_with_its_children(node, q, kids, flows, r):
    tree = flows.add({"name": "p", "queue_name": q.name, "children": [
        {"name": "c1", "queue_name": kids.name},
        {"name": "c2", "queue_name": kids.name,
         "children": [{"name": "g", "queue_name": q.name}]}]})
    assert node("removeJob", queue=q.name, id=tree.job.id)["code"] == 1
    assert not any(r.exists(n.job.key) for n in tree.walk())


def test_unprocessed_children_are_removed_both_ways(node, q, kids, flows):
    added = node("addFlowTree", tree={"name": "p", "queue": q.name, "children": [
        {"name": "a", "queue": kids.name}, {"name": "b", "queue": kids.name}]})
    assert q.get_job(added["id"]).remove_unprocessed_children() == 2
    info = node("flowInfo", queue=q.name, id=added["id"])
    assert info["state"] == "waiting" and info["dependencies"]["unprocessed"] == []

    tree = flows.add({"name": "p", "queue_name": q.name, "children": [
        {"name": "a", "queue_name": kids.name}, {"name": "b", "queue_name": kids.name}]})
    reply = node("removeUnprocessedChildren", queue=q.name, id=tree.job.id)
    assert reply["dependencies"]["unprocessed"] == []
    assert q.get_job_state(tree.job.id) == "waiting"
    assert all(kids.get_job(n.job.id) is None for n in tree.children)


def test_failed_children_values_are_read_both_ways(node, q, kids, flows):
    tree = flows.add({"name": "p", "queue_name": q.name, "children": [
        {"name": "fail", "queue_name": kids.name, "data": {"message": "node broke it"},
         "opts": {"ignore_dependency_on_failure": True}}]})
    node("work", queue=kids.name, count=1)
    child_key = tree.children[0].job.key
    assert q.get_job(tree.job.id).get_failed_children_values() == {child_key: "node broke it"}
    assert node("failedChildrenValues", queue=q.name, id=tree.job.id) == \
        {child_key: "node broke it"}


# -- queues_options ---------------------------------------------------------------------

def test_queues_options_reach_node_as_the_jobs_opts(node, q, kids, flows):
    tree = flows.add({"name": "p", "queue_name": q.name, "children": [
        {"name": "c", "queue_name": kids.name}]},
        queues_options={kids.name: {"default_job_options": {
            "attempts": 3, "priority": 7, "backoff": {"type": "fixed", "delay": 2}}}})
    child = node("getJob", queue=kids.name, id=tree.children[0].job.id)
    assert child["opts"]["attempts"] == 3 and child["priority"] == 7
    assert child["opts"]["backoff"] == {"type": "fixed", "delay": 2000}
    assert child["state"] == "prioritized"
    parent = node("getJob", queue=q.name, id=tree.job.id)
    assert parent["priority"] == 0 and parent["state"] == "waiting-children"
