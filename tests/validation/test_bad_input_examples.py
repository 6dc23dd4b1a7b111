"""The issue's own examples, one by one (the property suite covers the rest)."""
from __future__ import annotations

import pytest

from orijs_sync import Queue, QueueEvents, Worker, errors
from orijs_sync.events import BullMQEventProvider, InProcessEventProvider
from orijs_sync.workflows import InProcessWorkflowProvider, Workflow


def keyspace(r):
    return sorted(r.keys("*"))


@pytest.mark.parametrize("call, unknown, hint", [
    (lambda q: q.add("x", {}, backoff={"type": "fixed", "delay": 1, "dealy": 2}), "dealy",
     "delay"),
    (lambda q: q.add_bulk([{"name": "x", "opt": {"attempts": 2}}]), "opt", "opts"),
    (lambda q: Queue(q.name, q.connection, default_job_options={"atempts": 3}), "atempts",
     "attempts"),
    (lambda q: q.add("x", {}, atempts=3), "atempts", "attempts"),
    (lambda q: q.add("x", {}, remove_on_complete={"cuont": 3}), "cuont", "count"),
])
def test_misspelled_keys_are_named_with_the_valid_ones_and_a_hint(queue, r, call, unknown,
                                                                  hint):
    before = keyspace(r)
    with pytest.raises(errors.UnknownOption) as info:
        call(queue)
    message = str(info.value)
    assert repr(unknown) in message and f"did you mean {hint!r}" in message
    assert "valid keys:" in message and hint in info.value.valid
    assert keyspace(r) == before


def test_priority_bounds_are_bullmqs(queue):
    assert queue.add("x", {}, priority=2 ** 21 - 1).priority == 2 ** 21 - 1
    with pytest.raises(errors.InvalidArgument, match="priority"):
        queue.add("x", {}, priority=2 ** 21)


@pytest.mark.parametrize("jitter", [-0.1, 1.5, float("nan")])
def test_backoff_jitter_outside_0_1_is_refused(queue, jitter):
    with pytest.raises(errors.InvalidArgument, match="backoff.jitter"):
        queue.add("x", {}, backoff={"type": "fixed", "delay": 1, "jitter": jitter})
    assert queue.add("x", {}, backoff={"type": "fixed", "delay": 1, "jitter": 0.5})


def test_names_with_a_colon_are_refused_everywhere(redis_url):
    for make, arg in [(lambda: Queue("a:b", redis_url), "name"),
                      (lambda: Worker("a:b", print, redis_url), "name"),
                      (lambda: QueueEvents("a:b", redis_url, autorun=False), "names"),
                      (lambda: BullMQEventProvider(redis_url, queue_prefix="a:b"),
                       "queue_prefix")]:
        with pytest.raises(errors.InvalidArgument, match=arg):
            make()


def test_meta_that_is_not_a_mapping_is_refused_not_iterated():
    with InProcessEventProvider() as provider:
        with pytest.raises(errors.InvalidArgumentType, match="meta"):
            provider.emit("x.y", {}, meta=["#n"])
    wf = Workflow("Meta").step("a", lambda ctx: 1)
    with InProcessWorkflowProvider() as workflows:
        workflows.register(wf)
        with pytest.raises(errors.InvalidArgumentType, match="meta"):
            workflows.execute(wf, {}, meta=["#n"])


def test_a_wrong_idempotency_key_names_idempotency_key():
    wf = Workflow("Idem").step("a", lambda ctx: 1)
    with InProcessWorkflowProvider() as workflows, InProcessEventProvider() as events:
        workflows.register(wf)
        for call in (lambda: workflows.execute(wf, {}, idempotency_key=7),
                     lambda: events.emit("x.y", {}, idempotency_key=7)):
            with pytest.raises(errors.ValidationError) as info:
                call()
            assert "idempotency_key" in str(info.value) and "job_id" not in str(info.value)
