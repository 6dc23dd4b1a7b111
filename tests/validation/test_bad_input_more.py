"""The entry points the property suite does not drive: Job's constructor and writes,
move_to_waiting_children's child, the event layer's parts built directly, and
Workflow.parallel's items."""
from __future__ import annotations

import pytest

from orijs_sync import Job, Worker, errors
from orijs_sync.events import CompletionTracker, ScheduledEventManager
from orijs_sync.groups import GroupQueue
from orijs_sync.testing import wait_until
from orijs_sync.workflows import StepDef, Workflow


def keyspace(r):
    return sorted(r.keys("*"))


@pytest.mark.parametrize("kwargs, arg", [
    ({"job_id": ""}, "job_id"),
    ({"name": None}, "name"),
    ({"opts": ["attempts", 3]}, "opts"),
    ({"timestamp": float("nan")}, "timestamp"),
    ({"timestamp": -1}, "timestamp"),
])
def test_job_constructor_names_the_bad_argument(queue, kwargs, arg):
    args = {"job_id": "1", "name": "x", "data": {}, **kwargs}
    with pytest.raises(errors.ValidationError) as info:
        Job(queue, args.pop("job_id"), args.pop("name"), args.pop("data"), **args)
    assert arg in str(info.value)


@pytest.mark.parametrize("line", [None, 42, b"bytes", ["a"]])
def test_job_log_takes_text_only_and_writes_nothing(queue, r, line):
    job = queue.add("x", {})
    before = {key: r.type(key) for key in keyspace(r)}
    with pytest.raises(errors.InvalidArgumentType, match="line"):
        job.log(line)
    assert {key: r.type(key) for key in keyspace(r)} == before
    assert job.log("fine") == 1


def test_move_to_waiting_children_refuses_an_empty_child_key(queue, redis_url):
    seen = []

    def handler(job):
        try:
            job.move_to_waiting_children("")
        except errors.InvalidArgument as exc:
            seen.append(str(exc))
        return "done"

    job = queue.add("parent", {})
    with Worker(queue.name, handler, connection=redis_url):
        wait_until(lambda: queue.get_job_state(job.id) == "completed", timeout=10)
    assert seen and "child" in seen[0]


@pytest.mark.parametrize("make, arg", [
    (lambda url: CompletionTracker(url, prefix=""), "prefix"),
    (lambda url: CompletionTracker(url, prefix=3), "prefix"),
    (lambda url: CompletionTracker(url, queue_events_class="QueueEvents"), "queue_events_class"),
    (lambda url: CompletionTracker(url, default_timeout=float("nan")), "default_timeout"),
    (lambda url: ScheduledEventManager(url, queue_manager=object()), "queue_manager"),
    (lambda url: ScheduledEventManager(url, prefix=None), "prefix"),
    (lambda url: ScheduledEventManager(url, queue_class=None), "queue_class"),
])
def test_event_parts_built_directly_check_their_arguments(redis_url, make, arg):
    with pytest.raises(errors.ValidationError) as info:
        make(redis_url)
    assert arg in str(info.value)


def noop(ctx):
    return None


@pytest.mark.parametrize("items, error, arg", [
    ((("a", None),), errors.InvalidArgumentType, "items[0]"),       # a handler that is None
    ((("a", noop), ("b", None, noop)), errors.InvalidArgumentType, "items[1]"),
    ((("a", "noop"),), errors.InvalidArgumentType, "items[0]"),
    (("a",), errors.InvalidArgument, "items"),                      # a group of one
    (((("a", noop)),), errors.InvalidArgument, "items"),
    ((StepDef("a", noop),), errors.InvalidArgument, "items"),
    ((), errors.InvalidArgument, "items"),
    ((["a", noop], ("b", noop)), errors.InvalidArgumentType, "items[0]"),
])
def test_workflow_parallel_names_the_bad_item(items, error, arg):
    workflow = Workflow("Par").step("first", noop)
    with pytest.raises(error) as info:
        workflow.parallel(*items)
    assert info.value.argument == arg and arg in str(info.value)
    assert workflow.shape() == [("sequential", ["first"])]     # nothing was added
    declared = Workflow("Shape").parallel("a", "b").parallel(("c", noop), StepDef("d", noop))
    assert declared.shape() == [("parallel", ["a", "b"]), ("parallel", ["c", "d"])]


@pytest.mark.parametrize("call, arg", [
    (lambda gq: gq.reserve_batch(10 ** 20), "max_batch"),      # Redis's script refused it
    (lambda gq: gq.reserve_batch(2 ** 53), "max_batch"),
    (lambda gq: GroupQueue(gq.name, gq.connection, keep_completed=10 ** 20), "keep_completed"),
    (lambda gq: gq.add(group_id="g", data={}, max_attempts=2 ** 53), "max_attempts"),
])
def test_group_counts_past_javascripts_exact_integers_are_refused(redis_url, r, call, arg):
    gq = GroupQueue("validation-big", connection=redis_url)
    gq.add(group_id="g", data={})
    before = {key: r.type(key) for key in keyspace(r)}
    with pytest.raises(errors.InvalidArgument, match=arg):
        call(gq)
    assert {key: r.type(key) for key in keyspace(r)} == before
    gq.close()
