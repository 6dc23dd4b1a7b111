"""A wait that times out says what it waited for: the event (or workflow, or queue),
the job id and the seconds, instead of an empty ``TimeoutError``."""
from __future__ import annotations

import re

import pytest

import fork_cases
from orijs_sync import errors
from orijs_sync.events import BullMQEventProvider
from orijs_sync.workflows import BullMQWorkflowProvider


@pytest.fixture
def emitter(redis_url, namespace):
    provider = BullMQEventProvider(redis_url, queue_prefix=f"{namespace}.event").start()
    yield provider
    provider.stop(timeout=10)


def test_result_wait_names_the_event_job_and_seconds(emitter):
    sub = emitter.emit("order.created", {"id": 42})      # nobody subscribes
    with pytest.raises(errors.TimeoutError) as caught:
        sub.result(timeout=0.3)
    assert str(caught.value) == (f"event 'order.created' (job {sub.job_id}) got no result "
                                 f"within 0.3 s")
    assert isinstance(caught.value, TimeoutError)


def test_emit_timeout_names_the_event_job_and_seconds(emitter):
    sub = emitter.emit("order.created", {"id": 43}, timeout=0.3)
    with pytest.raises(errors.TimeoutError,
                       match=re.escape(f"event 'order.created' (job {sub.job_id}) got no "
                                       f"result within 0.3 s")):
        sub.result(timeout=10)


def test_workflow_result_wait_names_the_workflow(redis_url, namespace):
    provider = BullMQWorkflowProvider(redis_url, queue_prefix=f"{namespace}.workflow")
    provider.register_emitter("Add")                   # no process runs its steps
    provider.start()
    try:
        handle = provider.execute(fork_cases.ADD, {"x": 1})
        with pytest.raises(errors.TimeoutError,
                           match=re.escape(f"workflow 'Add' (job {handle.id}) got no result "
                                           f"within 0.3 s")):
            handle.result(timeout=0.3)
    finally:
        provider.stop(timeout=10)


def test_wait_until_finished_names_the_queue_and_job(queue, events):
    job = queue.add("nobody-works-here", {})
    with pytest.raises(errors.TimeoutError,
                       match=re.escape(f"queue '{queue.name}' (job {job.id}) got no result "
                                       f"within 0.3 s")):
        job.wait_until_finished(events, timeout=0.3)
