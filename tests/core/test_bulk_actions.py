"""Bulk actions on real Redis: retry_jobs and promote_jobs (in batches), remove with or
without children, a parent's remove_unprocessed_children and get_failed_children_values,
and FlowProducer's queues_options."""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

from orijs_sync import FlowProducer, Queue, Worker, errors
from orijs_sync.testing import wait_until

GUARD = 30.0


@pytest.fixture
def flows(redis_url: str) -> Iterator[FlowProducer]:
    producer = FlowProducer(connection=redis_url)
    yield producer
    producer.close()


@pytest.fixture
def other(redis_url: str, namespace: str) -> Iterator[Queue]:
    """A second queue (children of flows live there)."""
    q = Queue(f"kids-{namespace}", connection=redis_url)
    yield q
    q.close()


def events_of(r, queue: Queue) -> List[Dict[str, str]]:
    return [fields for _, fields in r.xrange(queue.keys.events)]


def run_until(queue: Queue, redis_url: str, handler: Any, done: Any) -> None:
    """A worker of ``queue`` runs until ``done()`` holds."""
    with Worker(queue.name, handler, connection=redis_url, drain_delay=0.2):
        wait_until(done, GUARD)


def fail_all(queue: Queue, redis_url: str, n: int) -> None:
    def failing(job):
        raise ValueError(f"no {job.data['i']}")
    run_until(queue, redis_url, failing, lambda: queue.get_job_counts("failed")["failed"] == n)


# -- retry_jobs -----------------------------------------------------------------------

def test_retry_jobs_moves_every_failed_job_back_in_batches(queue, redis_url, r):
    jobs = queue.add_bulk([{"name": "x", "data": {"i": i}} for i in range(7)])
    fail_all(queue, redis_url, 7)
    assert queue.retry_jobs(count=3) == 7
    assert queue.get_job_counts("failed", "waiting") == {"failed": 0, "waiting": 7, "paused": 0}
    job = queue.get_job(jobs[0].id)
    assert job.failed_reason is None and job.finished_on is None and job.attempts_made == 1
    waiting = [e for e in events_of(r, queue) if e["event"] == "waiting" and e.get("prev") == "failed"]
    assert sorted(e["jobId"] for e in waiting) == sorted(j.id for j in jobs)
    run_until(queue, redis_url, lambda j: "second", lambda: queue.get_job_counts(
        "completed")["completed"] == 7)
    assert queue.get_job(jobs[0].id).returnvalue == "second"


def test_retry_jobs_takes_only_jobs_finished_by_the_timestamp(queue, redis_url):
    early = queue.add_bulk([{"name": "x", "data": {"i": i}} for i in range(3)])
    fail_all(queue, redis_url, 3)
    cutoff = time.time()
    time.sleep(0.05)
    late = queue.add_bulk([{"name": "x", "data": {"i": i}} for i in range(2)])
    fail_all(queue, redis_url, 5)
    assert queue.retry_jobs(timestamp=cutoff) == 3
    assert {j.id for j in queue.get_waiting()} == {j.id for j in early}
    assert {j.id for j in queue.get_failed()} == {j.id for j in late}


def test_retry_jobs_of_completed_jobs_keeps_priority_and_drops_orphans(queue, redis_url, r):
    plain = queue.add("x", {"i": 0})
    urgent = queue.add("x", {"i": 1}, priority=3)
    run_until(queue, redis_url, lambda j: j.data["i"],
              lambda: queue.get_job_counts("completed")["completed"] == 2)
    r.zadd(queue.keys.completed, {"gone": 1})             # an id whose hash is gone
    assert queue.retry_jobs(state="completed", count=1) == 2
    assert not r.zscore(queue.keys.completed, "gone")
    assert queue.get_job_state(plain.id) == "waiting"
    assert queue.get_job_state(urgent.id) == "prioritized"
    assert queue.get_job(urgent.id).returnvalue is None


def test_retry_jobs_of_a_child_makes_its_parent_wait_for_it_again(flows, queue, other,
                                                                  redis_url, r):
    node = flows.add({"name": "p", "queue_name": queue.name,
                      "children": [{"name": "c", "queue_name": other.name}]})
    child = node.children[0].job
    run_until(other, redis_url, lambda j: "done",
              lambda: other.get_job_state(child.id) == "completed")
    assert other.retry_jobs(state="completed") == 1
    parent = queue.get_job(node.job.id)
    assert parent.get_dependencies()["unprocessed"] == [child.key]
    assert parent.get_children_values() == {}


@pytest.mark.parametrize("kwargs, arg", [({"state": "delayed"}, "state"), ({"state": 1}, "state"),
                                         ({"count": 0}, "count"), ({"count": 2.0}, "count"),
                                         ({"timestamp": -1}, "timestamp"),
                                         ({"timestamp": "now"}, "timestamp")])
def test_retry_jobs_refuses_bad_arguments_and_moves_nothing(queue, redis_url, kwargs, arg):
    queue.add("x", {"i": 0})
    fail_all(queue, redis_url, 1)
    with pytest.raises(errors.ValidationError, match=arg):
        queue.retry_jobs(**kwargs)
    assert queue.get_job_counts("failed")["failed"] == 1


# -- promote_jobs ---------------------------------------------------------------------

def test_promote_jobs_moves_every_delayed_job_to_wait_in_batches(queue, r):
    jobs = [queue.add("x", {"i": i}, delay=60) for i in range(5)]
    urgent = queue.add("x", {"i": 9}, delay=60, priority=2)
    assert queue.promote_jobs(count=2) == 6
    assert queue.get_job_counts("delayed", "waiting", "prioritized") == {
        "delayed": 0, "waiting": 5, "prioritized": 1, "paused": 0}
    assert queue.get_job(urgent.id).delay == 0
    assert queue.get_job_state(jobs[0].id) == "waiting"
    promoted = [e for e in events_of(r, queue) if e.get("prev") == "delayed"]
    assert len(promoted) == 6
    assert queue.promote_jobs() == 0


def test_promoted_jobs_run_now(queue, redis_url):
    jobs = [queue.add("x", {"i": i}, delay=3600) for i in range(3)]
    queue.promote_jobs()
    run_until(queue, redis_url, lambda j: j.data["i"],
              lambda: all(queue.get_job_state(j.id) == "completed" for j in jobs))


@pytest.mark.parametrize("count", [0, -1, 1.5, "3", None])
def test_promote_jobs_refuses_a_bad_count(queue, count):
    queue.add("x", {}, delay=60)
    with pytest.raises(errors.ValidationError, match="count"):
        queue.promote_jobs(count=count)
    assert queue.get_job_counts("delayed")["delayed"] == 1


# -- remove with children ---------------------------------------------------------------

def tree(flows: FlowProducer, top: Queue, kids: Queue) -> Any:
    """top: p -> (kids: c1, c2 -> (top: g))."""
    return flows.add({"name": "p", "queue_name": top.name, "children": [
        {"name": "c1", "queue_name": kids.name},
        {"name": "c2", "queue_name": kids.name, "children": [
            {"name": "g", "queue_name": top.name}]}]})


def test_remove_takes_the_whole_tree_across_queues(flows, queue, other, r):
    node = tree(flows, queue, other)
    every = [n.job for n in node.walk()]
    assert queue.remove(node.job.id) is True
    assert not any(r.exists(j.key) for j in every)
    assert queue.get_job_counts("waiting", "waiting-children") == {
        "waiting": 0, "waiting-children": 0, "paused": 0}
    assert other.get_job_counts("waiting", "waiting-children") == {
        "waiting": 0, "waiting-children": 0, "paused": 0}
    removed = {e["jobId"] for q in (queue, other) for e in events_of(r, q)
               if e["event"] == "removed"}
    assert removed == {j.id for j in every}


def test_remove_without_children_leaves_them(flows, queue, other, r):
    node = tree(flows, queue, other)
    assert node.job.remove(remove_children=False) is True
    assert not r.exists(node.job.key)
    assert all(r.exists(n.job.key) for n in node.walk() if n is not node)


def test_remove_takes_finished_children_too(flows, queue, other, redis_url, r):
    node = flows.add({"name": "p", "queue_name": queue.name, "children": [
        {"name": "ok", "queue_name": other.name},
        {"name": "bad", "queue_name": other.name,
         "opts": {"ignore_dependency_on_failure": True}}]})

    def handler(job):
        if job.name == "bad":
            raise ValueError("bad child")
        return 1
    run_until(other, redis_url, handler,
              lambda: queue.get_job_state(node.job.id) == "waiting")
    assert queue.remove(node.job.id) is True
    assert not any(r.exists(n.job.key) for n in node.walk())
    assert other.get_job_counts("completed", "failed") == {"completed": 0, "failed": 0}


def test_remove_refuses_while_a_child_is_being_processed(flows, queue, other, redis_url, r):
    node = tree(flows, queue, other)
    started, release = threading.Event(), threading.Event()

    def holding(job):
        started.set()
        release.wait(GUARD)
    with Worker(other.name, holding, connection=redis_url):
        assert started.wait(GUARD)
        assert queue.remove(node.job.id) is False            # c1 (or c2's run) is locked
        assert all(r.exists(n.job.key) for n in node.walk())
        assert queue.remove(node.job.id, remove_children=False) is True
        release.set()


def test_remove_keeps_its_states_guard_and_refuses_bad_arguments(queue, r):
    job = queue.add("x", {}, delay=60)
    assert queue.remove(job.id, ["waiting"]) is False
    for bad in ("yes", 1, None):
        with pytest.raises(errors.InvalidArgumentType, match="remove_children"):
            queue.remove(job.id, remove_children=bad)
        with pytest.raises(errors.InvalidArgumentType, match="remove_children"):
            job.remove(remove_children=bad)
    assert r.exists(job.key)
    assert queue.remove(job.id, ["delayed"], remove_children=False) is True


# -- a parent's children ----------------------------------------------------------------

def test_remove_unprocessed_children_keeps_done_locked_and_failed_ones(flows, queue, other,
                                                                      redis_url, r):
    node = flows.add({"name": "p", "queue_name": queue.name, "children": [
        {"name": "done", "queue_name": other.name},
        {"name": "hold", "queue_name": other.name},
        {"name": "bad", "queue_name": other.name},
        {"name": "pending", "queue_name": other.name, "opts": {"delay": 3600},
         "children": [{"name": "g", "queue_name": queue.name, "opts": {"delay": 3600}}]}]})
    by_name = {n.job.name: n.job for n in node.walk()}
    started, release = threading.Event(), threading.Event()

    def handler(job):
        if job.name == "hold":
            started.set()
            release.wait(GUARD)
        if job.name == "bad":
            raise ValueError("bad")
        return job.name
    with Worker(other.name, handler, connection=redis_url, concurrency=3):
        wait_until(lambda: started.is_set() and other.get_job_counts(
            "completed", "failed") == {"completed": 1, "failed": 1}, GUARD)
        parent = queue.get_job(node.job.id)
        assert parent.remove_unprocessed_children() == 2     # "pending" and its child
        deps = parent.get_dependencies()
        release.set()
    assert not r.exists(by_name["pending"].key) and not r.exists(by_name["g"].key)
    for kept in ("done", "hold", "bad"):
        assert r.exists(by_name[kept].key), kept
    assert deps["processed"] == {by_name["done"].key: "done"}
    assert sorted(deps["unprocessed"]) == sorted([by_name["hold"].key, by_name["bad"].key])
    assert queue.get_job_state(node.job.id) == "waiting-children"   # "bad" keeps it waiting


def test_a_parent_whose_pending_children_are_removed_moves_on(flows, queue, other):
    node = flows.add({"name": "p", "queue_name": queue.name, "children": [
        {"name": "a", "queue_name": other.name}, {"name": "b", "queue_name": other.name}]})
    assert node.job.remove_unprocessed_children() == 2
    assert queue.get_job_state(node.job.id) == "waiting"
    assert other.get_job_counts("waiting")["waiting"] == 0
    assert node.job.remove_unprocessed_children() == 0


def test_remove_unprocessed_children_of_a_missing_job_raises(queue):
    job = queue.add("x", {})
    queue.remove(job.id)
    with pytest.raises(errors.JobNotFound):
        job.remove_unprocessed_children()


def test_get_failed_children_values_reads_the_ignored_failures(flows, queue, other, redis_url):
    node = flows.add({"name": "p", "queue_name": queue.name, "children": [
        {"name": "bad", "queue_name": other.name,
         "opts": {"ignore_dependency_on_failure": True}}]})

    def failing(job):
        raise ValueError("child broke")
    run_until(other, redis_url, failing, lambda: queue.get_job_state(node.job.id) == "waiting")
    parent = queue.get_job(node.job.id)
    assert parent.get_failed_children_values() == {node.children[0].job.key: "child broke"}
    assert parent.get_failed_children_values() == parent.get_ignored_children_failures()
    assert queue.add("x", {}).get_failed_children_values() == {}


# -- FlowProducer queues_options ---------------------------------------------------------

def test_queues_options_give_each_queue_default_job_options(flows, queue, other):
    node = flows.add({"name": "p", "queue_name": queue.name, "children": [
        {"name": "c1", "queue_name": other.name},
        {"name": "c2", "queue_name": other.name, "opts": {"attempts": 9}}]},
        queues_options={other.name: {"default_job_options": {
            "attempts": 4, "priority": 5, "remove_on_complete": True}}})
    parent = queue.get_job(node.job.id)
    c1, c2 = (other.get_job(n.job.id) for n in node.children)
    assert "removeOnComplete" not in parent.opts and parent.opts["attempts"] == 1
    assert (c1.opts["attempts"], c1.priority, c1.opts["removeOnComplete"]) == (4, 5, True)
    assert (c2.opts["attempts"], c2.priority) == (9, 5)     # a node's own opts win
    assert other.get_job_state(c1.id) == "prioritized"
    again = flows.add({"name": "c", "queue_name": other.name})
    assert other.get_job(again.job.id).opts["attempts"] == 1     # for that add only


@pytest.mark.parametrize("queues_options, arg", [
    ([], "queues_options"),
    ({"q": []}, "queues_options['q']"),
    ({"a:b": {}}, "queues_options key"),
    ({"q": {"streams": {"events": {"max_len": 10}}}}, "queues_options['q'].streams"),
    ({"q": {"prefix": "other"}}, "queues_options['q'].prefix"),
    ({"q": {"connection": "redis://"}}, "queues_options['q'].connection"),
    ({"q": {"skip_metas_update": True}}, "queues_options['q'].skip_metas_update"),
    ({"q": {"default_job_option": {}}}, "default_job_option"),
    ({"q": {"default_job_options": {"job_id": "one"}}}, "default_job_options.job_id"),
    ({"q": {"default_job_options": {"parent": {"id": "1", "queue": "bull:x"}}}},
     "default_job_options.parent"),
    ({"q": {"default_job_options": {"deduplication": {"id": "d"}}}},
     "default_job_options.deduplication"),
    ({"q": {"default_job_options": {"priority": -1}}}, "priority"),
    ({"q": {"default_job_options": {"atempts": 2}}}, "atempts"),
])
def test_queues_options_refuse_what_a_flow_cannot_use_and_add_nothing(flows, queue,
                                                                     queues_options, arg):
    flow = {"name": "p", "queue_name": queue.name}
    options = {queue.name if k == "q" else k: v for k, v in queues_options.items()} \
        if isinstance(queues_options, dict) else queues_options
    with pytest.raises(errors.ValidationError) as caught:
        flows.add(flow, queues_options=options)
    assert arg.replace("'q'", repr(queue.name)) in str(caught.value)
    assert queue.count() == 0
