"""The call writing a flow's last child takes its parent when a Worker of the same
group serves the parent's queue (real Redis): the parent's worker is not woken to
take it, and a slot reserved for it is never lost."""
from __future__ import annotations

import threading
from typing import Any, Iterator, List

import pytest
import redis
from flow_helpers import wait_until

from orijs_sync import FlowProducer, Job, Queue, Worker, WorkerGroup


@pytest.fixture
def group(redis_url: str) -> Iterator[WorkerGroup]:
    with WorkerGroup(redis_url) as g:
        yield g


def counting_fetches(worker: Worker) -> List[int]:
    """Counts the worker's own takes (moveToActive calls, alone or pipelined)."""
    fetches: List[int] = []
    call = worker._fetch_call

    def counted(count: int) -> Any:
        fetches.append(count)
        return call(count)
    worker._fetch_call = counted          # type: ignore[method-assign]
    return fetches


def add_flow(flows: FlowProducer, qn: Any) -> Any:
    return flows.add({"name": "p", "queue_name": qn("p"), "children": [
        {"name": "c", "queue_name": qn("c"), "data": {"i": i}} for i in range(2)]})


def sum_children(job: Job) -> Any:
    return sum(job.get_children_values().values())


def test_the_last_childs_write_takes_the_parent_for_its_worker(flows, qn, group,
                                                                r: redis.Redis):
    children = Worker(qn("c"), lambda job: job.data["i"] + 1, group=group, concurrency=1)
    parents = Worker(qn("p"), sum_children, group=group, concurrency=2)
    fetches = counting_fetches(parents)
    with children, parents, Queue(qn("p"), connection=group.connection) as queue:
        wait_until(lambda: len(fetches) >= 1)           # found its queue empty at start
        fetches.clear()
        node = add_flow(flows, qn)
        wait_until(lambda: queue.get_job_state(node.job.id) == "completed")
        assert queue.get_job(node.job.id).returnvalue == 3
        assert fetches == []          # no take of its own: the child's write took it
        last_finished = max(int(r.hget(f"bull:{qn('c')}:{child.job.id}", "finishedOn"))
                            for child in node.children)
        assert int(r.hget(f"bull:{qn('p')}:{node.job.id}", "processedOn")) == last_finished
        assert r.zscore(queue.keys.marker, "0") is None     # nothing left to wake anyone
        wait_until(lambda: parents._free == 2 and children._free == 1)


def test_a_parent_worker_without_a_free_slot_takes_it_itself_later(flows, qn, group):
    release = threading.Event()

    def parent_handler(job: Job) -> Any:
        if job.name == "blocker":
            release.wait(30)
            return "unblocked"
        return sum_children(job)

    children = Worker(qn("c"), lambda job: job.data["i"] + 1, group=group, concurrency=1)
    parents = Worker(qn("p"), parent_handler, group=group, concurrency=1)
    with children, parents, Queue(qn("p"), connection=group.connection) as queue, \
            Queue(qn("c"), connection=group.connection) as child_queue:
        blocker = queue.add("blocker", {})
        wait_until(lambda: queue.get_job_state(blocker.id) == "active")
        node = add_flow(flows, qn)
        wait_until(lambda: child_queue.get_job_counts("completed")["completed"] == 2)
        assert queue.get_job_state(node.job.id) == "waiting"     # its only slot is busy
        release.set()
        wait_until(lambda: queue.get_job_state(node.job.id) == "completed")
        assert queue.get_job(node.job.id).returnvalue == 3
        wait_until(lambda: parents._free == 1)


@pytest.mark.parametrize("paused", ["queue", "worker"])
def test_a_paused_parent_queue_or_worker_keeps_the_parent_waiting(flows, qn, group, paused):
    children = Worker(qn("c"), lambda job: job.data["i"] + 1, group=group, concurrency=1)
    parents = Worker(qn("p"), sum_children, group=group, concurrency=2)
    with children, parents, Queue(qn("p"), connection=group.connection) as queue, \
            Queue(qn("c"), connection=group.connection) as child_queue:
        if paused == "queue":
            queue.pause()
        else:
            parents.pause()
        node = add_flow(flows, qn)
        wait_until(lambda: child_queue.get_job_counts("completed")["completed"] == 2)
        assert queue.get_job_state(node.job.id) in ("waiting", "paused")
        assert queue.get_job(node.job.id).processed_on is None     # never taken
        # a slot reserved for a take that found the queue paused was given back
        wait_until(lambda: parents._free == 2)
        if paused == "queue":
            queue.resume()
        else:
            parents.resume()
        wait_until(lambda: queue.get_job_state(node.job.id) == "completed")
        assert queue.get_job(node.job.id).returnvalue == 3
