"""BullMQWorkflowProvider on Redis: the layout it writes, the flow registry, failures
read back by a provider that did not run the step, the Redis check before a timeout."""
from __future__ import annotations

import threading
from typing import Any, List

import pytest

from orijs_sync import FlowProducer, Job, Queue
from orijs_sync.workflows import Workflow, WorkflowFailedError, WorkflowTimeoutError
from orijs_sync.workflows._registry import flow_hash
from wf_helpers import GUARD, Journal, wait_until


def order_workflow(j: Journal) -> Workflow:
    return (Workflow("OrderWorkflow")
            .step("validate", j.step("validate", {"valid": True}))
            .step("charge", j.step("charge", {"chargeId": "ch_1"}), j.rollback("charge"))
            .parallel(("email", j.step("email", "sent")), ("sms", j.step("sms", "texted")))
            .step("fulfill", j.step("fulfill", {"shipped": True})))


def test_layout_in_redis(bullmq, redis_url):
    j = Journal()
    order = order_workflow(j)
    emitter = bullmq()
    emitter.register_emitter(order.name)
    qp = bullmq.queue_prefix
    handle = emitter.execute(order, {"orderId": "1"}, idempotency_key="order-1",
                             meta={"traceId": "t-1"})
    assert handle.id == "order-1"
    parent_q = Queue(f"{qp}.OrderWorkflow", connection=redis_url)
    steps_q = Queue(f"{qp}.OrderWorkflow.steps", connection=redis_url)
    try:
        wait_until(lambda: parent_q.get_job("order-1") is not None,  # added on a sender
                   what="the flow added")                             # thread
        parent = parent_q.get_job("order-1")
        assert parent.name == "OrderWorkflow" and parent.get_state() == "waiting-children"
        assert parent.data == {"type": "workflow", "version": "1", "flowId": "order-1",
                               "workflowData": {"orderId": "1"}, "stepResults": {},
                               "meta": {"traceId": "t-1"}}
        chain = [("order-1-step-fulfill", "fulfill", "order-1"),
                 ("order-1-step-__parallel__-email,sms", "__parallel__:email,sms",
                  "order-1-step-fulfill"),
                 ("order-1-step-charge", "charge", "order-1-step-__parallel__-email,sms"),
                 ("order-1-step-validate", "validate", "order-1-step-charge")]
        for job_id, step_name, parent_id in chain:
            job = steps_q.get_job(job_id)
            assert job is not None, job_id
            assert job.name == step_name and job.opts["fpof"] is True
            assert job.data == {"type": "step", "version": "1", "flowId": "order-1",
                                "stepName": step_name, "workflowData": {"orderId": "1"},
                                "meta": {"traceId": "t-1"}}
            assert job.parent["id"] == parent_id
            assert job.get_state() == ("waiting" if step_name == "validate"
                                       else "waiting-children")
        # The same key again adds nothing new.
        before = steps_q.get_job_counts()
        again = emitter.execute(order, {"orderId": "other"}, idempotency_key="order-1")
        wait_until(emitter._sender.idle, what="the second execute's add")
        assert steps_q.get_job_counts() == before
        assert parent_q.get_job("order-1").data["workflowData"] == {"orderId": "1"}

        bullmq(order)                      # a consumer: the flow runs
        result = handle.result(timeout=GUARD)
        assert again.result(timeout=GUARD) == result == {
            "validate": {"valid": True}, "charge": {"chargeId": "ch_1"}, "email": "sent",
            "sms": "texted", "fulfill": {"shipped": True}}
        assert parent_q.get_job("order-1").returnvalue == result
        assert steps_q.get_job("order-1-step-charge").returnvalue == {
            "__version": "1", "__stepName": "charge", "__stepResult": {"chargeId": "ch_1"},
            "__priorResults": {"validate": {"valid": True}}}
        assert steps_q.get_job("order-1-step-__parallel__-email,sms").returnvalue == {
            "__version": "1", "__parallelResults": {"email": "sent", "sms": "texted"},
            "__priorResults": {"validate": {"valid": True}, "charge": {"chargeId": "ch_1"}}}
        with FlowProducer(redis_url) as flows:
            tree = flows.get_flow("order-1", f"{qp}.OrderWorkflow")
        assert [n.job.id for n in tree.walk()] == ["order-1"] + [c[0] for c in chain]
    finally:
        parent_q.close()
        steps_q.close()


def test_flow_registry_and_status_from_another_provider(bullmq, r):
    wf = Workflow("Registered").step("a", lambda ctx: 1)
    runner = bullmq(wf)
    handle = runner.execute(wf, {})
    handle.result(timeout=GUARD)
    key = f"{bullmq.queue_prefix}:fr:{flow_hash(handle.id)}"
    assert runner.flow_registry.key(handle.id) == key
    assert r.get(key) == "Registered" and 0 < r.ttl(key) <= 900
    stranger = bullmq()                      # knows no workflow: asks the registry
    assert stranger.get_status(handle.id) == "completed"
    assert stranger.lookup_flow(handle.id) == "Registered"
    r.delete(key)                            # expired: fall back to searching
    assert stranger.get_status(handle.id) == "pending"       # as OriJS: not found
    searcher = bullmq()
    searcher.register_emitter("Registered")
    assert searcher.lookup_flow(handle.id) == "Registered"
    assert searcher.get_status(handle.id) == "completed"


def test_failure_read_back_by_a_provider_that_did_not_run_the_step(bullmq):
    j = Journal()
    wf = (Workflow("Remote").step("a", j.step("a"), j.rollback("a", fail=True))
          .step("b", j.step("b"), j.rollback("b"))
          .parallel(("c", j.step("c"), j.rollback("c")), ("d", j.step("d", fail=True))))
    bullmq(wf)                               # runs the steps
    emitter = bullmq()
    emitter.register_emitter("Remote")
    with pytest.raises(WorkflowFailedError) as info:
        emitter.execute(wf, {}).result(timeout=GUARD)
    err = info.value
    assert (err.primary.step_name, err.primary.error_type, err.primary.message) == \
        ("d", "ValueError", "d failed")
    assert err.rolled_back == ["c", "b"]
    assert [(e.step_name, e.error_type, e.message) for e in err.rollback_errors] == \
        [("a", "RuntimeError", "rollback a failed")]


def test_timeout_checks_redis_before_rejecting(bullmq):
    """The emitter's events thread is held up (a done-callback that blocks), so outcomes
    reach it only through the timeout's Redis check: they are results, not timeouts."""
    go, unblock = threading.Event(), threading.Event()
    j = Journal()
    held = Workflow("Held").step("a", lambda ctx: go.wait(GUARD) and ctx.data)
    fails = (Workflow("HeldFails").step("a", j.step("a"), j.rollback("a"))
             .step("b", j.step("b", fail=True)))
    bullmq(held, fails)                      # another provider runs the steps
    emitter = bullmq()
    emitter.register_emitter("Held")
    emitter.register_emitter("HeldFails")
    stuck = Workflow("NobodyRuns").step("a", lambda ctx: 1)
    emitter.register_emitter("NobodyRuns")
    first = emitter.execute(held, 0)
    first.add_done_callback(lambda _: unblock.wait(GUARD))   # runs on the events thread
    try:
        go.set()
        wait_until(first.done, what="the first workflow")    # the events thread is now held
        second = emitter.execute(held, 1, timeout=0.1)       # effective 5.1 s
        third = emitter.execute(fails, {}, timeout=0.1)
        fourth = emitter.execute(stuck, {}, timeout=0.1)     # nobody runs it
        assert second.result(timeout=GUARD) == {"a": 1}
        with pytest.raises(WorkflowFailedError) as info:
            third.result(timeout=GUARD)
        assert info.value.primary.step_name == "b" and info.value.rolled_back == ["a"]
        with pytest.raises(WorkflowTimeoutError):
            fourth.result(timeout=GUARD)
        assert fourth.status() == "failed"       # timed out, as OriJS says (Redis: waiting)
    finally:
        unblock.set()
    assert first.result(timeout=GUARD) == {"a": 0}


def test_steps_get_the_results_before_them_with_the_job_not_by_another_read(
        bullmq, monkeypatch):
    """Each step job and the workflow job come with their children's values, read in
    the script call that took them: no read of the processed hash per job."""
    reads: List[str] = []
    original = Job.get_children_values

    def counted(job: Job) -> Any:
        reads.append(job.id)
        return original(job)
    monkeypatch.setattr(Job, "get_children_values", counted)
    chain = (Workflow("Chain")
             .step("a", lambda ctx: {"a": ctx.data["n"]})
             .parallel(("b1", lambda ctx: ctx.get_result("a")["a"] + 1),
                       ("b2", lambda ctx: ctx.get_result("a")["a"] + 2))
             .step("c", lambda ctx: {"c": ctx.get_result("b1") * ctx.get_result("b2")}))
    provider = bullmq(chain)
    for n in (1, 5):
        result = provider.execute(chain, {"n": n}).result(timeout=GUARD)
        assert result["c"] == {"c": (n + 1) * (n + 2)}, result
    assert reads == []
