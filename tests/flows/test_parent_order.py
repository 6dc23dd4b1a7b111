"""A parent made ready (its last child done, failed with an option, cut loose or removed)
is the next job its queue hands out, as BullMQ's RPUSH makes it: it does not wait
behind every job added while its children ran (real Redis)."""
from __future__ import annotations

import threading
from typing import Any, List

import redis
from flow_helpers import wait_until

from orijs_sync import FlowProducer, Queue, Worker

WAITING = 5


def add_flow(flows: FlowProducer, qn: Any, **child_opts: Any) -> Any:
    return flows.add({"name": "parent", "queue_name": qn("p"), "children": [
        {"name": "child", "queue_name": qn("c"), "opts": child_opts}]})


def fill(queue: Queue) -> None:
    for i in range(WAITING):
        queue.add(f"plain-{i}", {})


def taken_order(redis_url: str, name: str, count: int) -> List[str]:
    """The names of the first ``count`` jobs one worker of concurrency 1 takes."""
    order: List[str] = []
    done = threading.Event()

    def handler(job: Any) -> None:
        order.append(job.name)
        if len(order) >= count:
            done.set()
    with Worker(name, handler, connection=redis_url, concurrency=1):
        assert done.wait(30), order
    return order[:count]


def run_children(redis_url: str, qn: Any, queue: Queue, node: Any, handler: Any = None) -> None:
    with Worker(qn("c"), handler or (lambda job: 1), connection=redis_url):
        wait_until(lambda: queue.get_job_state(node.job.id) in ("waiting", "prioritized"))


def test_a_parent_whose_last_child_completes_is_taken_next(flows, qn, redis_url,
                                                           r: redis.Redis):
    with Queue(qn("p"), connection=redis_url) as queue:
        node = add_flow(flows, qn)
        fill(queue)
        run_children(redis_url, qn, queue, node)
        assert r.lindex(queue.keys.wait, -1) == node.job.id       # the right end: next
        assert taken_order(redis_url, qn("p"), 2) == ["parent", "plain-0"]


def test_a_parent_made_ready_while_paused_is_taken_first_on_resume(flows, qn, redis_url,
                                                                   r: redis.Redis):
    with Queue(qn("p"), connection=redis_url) as queue:
        node = add_flow(flows, qn)
        fill(queue)
        queue.pause()
        run_children(redis_url, qn, queue, node)
        assert r.lindex(queue.keys.paused, -1) == node.job.id
        queue.resume()
        assert taken_order(redis_url, qn("p"), 2) == ["parent", "plain-0"]


def test_a_parent_released_by_a_failing_child_is_taken_next(flows, qn, redis_url):
    def fail(job: Any) -> None:
        raise RuntimeError("no")
    with Queue(qn("p"), connection=redis_url) as queue:
        node = add_flow(flows, qn, ignore_dependency_on_failure=True)
        fill(queue)
        run_children(redis_url, qn, queue, node, fail)
        assert taken_order(redis_url, qn("p"), 2) == ["parent", "plain-0"]


def test_a_parent_whose_last_child_is_removed_or_cut_loose_is_taken_next(flows, qn,
                                                                         redis_url):
    with Queue(qn("p"), connection=redis_url) as queue, \
            Queue(qn("c"), connection=redis_url) as children:
        removed, cut = add_flow(flows, qn), add_flow(flows, qn)
        fill(queue)
        assert children.remove(removed.children[0].job.id)
        assert children.get_job(cut.children[0].job.id).remove_child_dependency()
        order = taken_order(redis_url, qn("p"), 3)
        assert order == ["parent", "parent", "plain-0"]


def test_a_prioritized_parent_goes_to_the_prioritized_set(flows, qn, redis_url,
                                                          r: redis.Redis):
    with Queue(qn("p"), connection=redis_url) as queue:
        node = flows.add({"name": "parent", "queue_name": qn("p"), "opts": {"priority": 3},
                          "children": [{"name": "child", "queue_name": qn("c")}]})
        fill(queue)
        run_children(redis_url, qn, queue, node)
        assert r.zscore(queue.keys.prioritized, node.job.id) is not None
        assert node.job.id not in r.lrange(queue.keys.wait, 0, -1)
        assert queue.get_job_state(node.job.id) == "prioritized"
