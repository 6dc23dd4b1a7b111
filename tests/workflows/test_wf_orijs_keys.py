"""The side keys @orijs/bullmq keeps beside a flow, byte for byte (docs/compatibility.md):
Bun.hash (wyhash) against the contract's vectors, the registry and failure keys Python
writes, the failure texts (``Step '<name>' failed: ...``, ``ORIJSError:{json}``) and
their decoding into our errors, and when the record is written and read."""
from __future__ import annotations

import json
from typing import Any, List

import pytest

from orijs_sync import QueueEvents
from orijs_sync.workflows import RollbackFailedError, Workflow, WorkflowFailedError
from orijs_sync.workflows._failure_codec import decode_failure, encode_failure
from orijs_sync.workflows._registry import FlowRegistry
from orijs_sync.workflows._wyhash import bun_hash, wyhash
from wf_helpers import GUARD, Journal, wait_until

# (text, Bun.hash in decimal, in base 36): the contract's vectors, produced by Bun 1.4.5.
VECTORS = [
    ("", 290873116282709081, "27k1wwwhf13t"),
    ("a", 2941419223392617777, "mcie3cqm6cz5"),
    ("abc", 190542993387777138, "1g45uqqks6lu"),
    ("flow-1", 17272860523859301800, "3n8bi1g531eaw"),
    ("flow-0f8e5a2c-3b1d-4e7a-9c2b-5d6e7f8a9b0c", 3061457927420938164, "n9cc9g3158l0"),
    ("OrderWorkflow", 15944282158856358304, "3d4xsbd3t509s"),
    ("x" * 16, 827872304449044717, "6afk8manhkh9"),
    ("y" * 17, 13376770794812671952, "2tmp1hvmkh3gw"),
    ("z" * 48, 12656748515751076971, "2o5rewf0bjd63"),
    ("w" * 49, 1323046317773844523, "a1v8rzmex5ij"),
    ("q" * 100, 3578155665363701500, "r6nybnzw0ge4"),
    ("héllo wörld", 13259706632265098181, "2sqodpprur9ol"),
    ("日本語のワークフロー", 3544661419374850503, "qxi5lrt61z2f"),
]


@pytest.mark.parametrize("text,decimal,base36", VECTORS, ids=[repr(v[0][:12]) for v in VECTORS])
def test_wyhash_matches_bun_hash(text, decimal, base36):
    assert wyhash(text.encode("utf-8")) == decimal
    assert bun_hash(text) == base36


def test_keys_are_the_contracts():
    registry = FlowRegistry(None, "workflow")
    assert registry.key("flow-1") == "workflow:fr:3n8bi1g531eaw"
    assert registry.failure_key("flow-1") == "workflow:workflow-failure:3n8bi1g531eaw"
    assert FlowRegistry(None, "wf").key("日本語のワークフロー") == "wf:fr:qxi5lrt61z2f"


# -- failure texts --------------------------------------------------------------------------
def test_step_failure_text_and_its_decoding():
    text = encode_failure("charge", "ValueError", "card declined")
    assert text == "Step 'charge' failed: card declined"
    err = decode_failure("Order", "f-1", text)
    assert isinstance(err, WorkflowFailedError)
    assert (err.workflow_name, err.flow_id, err.step_name) == ("Order", "f-1", "charge")
    assert (err.primary.step_name, err.primary.error_type, err.primary.message) == \
        ("charge", "Error", "card declined")
    assert err.rollback_errors == []


def test_rollback_failure_text_is_orijs_error_json():
    rollbacks = [RollbackFailedError("b", "RuntimeError", "b: «refund» refused"),
                 RollbackFailedError("a", "TypeError", "a gone")]
    text = encode_failure("c", "ValueError", "boom", rollbacks)
    # Compact JSON with raw UTF-8, as JSON.stringify writes it.
    assert text == ('ORIJSError:{"primary":{"name":"WorkflowStepError","message":'
                    '"Step \'c\' failed: boom","stepName":"c"},"rollbacks":['
                    '{"name":"RuntimeError","message":"b: «refund» refused"},'
                    '{"name":"TypeError","message":"a gone"}]}')
    err = decode_failure("Order", "f-1", text)
    assert (err.primary.step_name, err.primary.message) == ("c", "boom")
    assert [(e.step_name, e.error_type, e.message) for e in err.rollback_errors] == \
        [(None, "RuntimeError", "b: «refund» refused"), (None, "TypeError", "a gone")]
    assert "a rollback failed: TypeError: a gone" == str(err.rollback_errors[1])


def test_completion_failure_text_has_no_step_name():
    text = encode_failure(None, "KeyError", "'total'",
                          [RollbackFailedError("a", "RuntimeError", "no")])
    assert json.loads(text[len("ORIJSError:"):])["primary"] == {"name": "KeyError",
                                                                 "message": "'total'"}
    err = decode_failure("Order", "f-1", text)
    assert (err.primary.step_name, err.primary.error_type, err.primary.message) == \
        (None, "KeyError", "'total'")
    assert encode_failure(None, "KeyError", "'total'") == "'total'"


@pytest.mark.parametrize("text", ["child bull:wf.Order.steps:f-1-step-a failed",
                                  "ORIJSError:{not json", "ORIJSError:[1, 2]"])
def test_other_texts_decode_whole(text):
    err = decode_failure("Order", "f-1", text, step_name="a")
    assert (err.primary.step_name, err.primary.error_type, err.primary.message) == \
        ("a", "Error", text)
    assert err.rollback_errors == []


# -- the record in Redis ----------------------------------------------------------------------
def failing_workflow(j: Journal) -> Workflow:
    return (Workflow("Keyed").step("a", j.step("a"), j.rollback("a", fail=True))
            .step("b", j.step("b"), j.rollback("b"))
            .step("c", j.step("c", fail=True)))


def test_python_writes_the_contracts_keys(bullmq, r):
    flow_id = "flow-0f8e5a2c-3b1d-4e7a-9c2b-5d6e7f8a9b0c"
    wf = failing_workflow(Journal())
    provider = bullmq(wf)
    with pytest.raises(WorkflowFailedError):
        provider.execute(wf, {}, idempotency_key=flow_id).result(timeout=GUARD)
    qp = bullmq.queue_prefix
    registry, failure = f"{qp}:fr:n9cc9g3158l0", f"{qp}:workflow-failure:n9cc9g3158l0"
    assert r.get(registry) == "Keyed" and 0 < r.ttl(registry) <= 900
    assert 0 < r.ttl(failure) <= 900
    assert json.loads(r.get(failure)[len("ORIJSError:"):]) == {
        "primary": {"name": "WorkflowStepError", "message": "Step 'c' failed: c failed",
                    "stepName": "c"},
        "rollbacks": [{"name": "RuntimeError", "message": "rollback a failed"}]}
    step = provider._producer.queue(f"{qp}.Keyed.steps").get_job(f"{flow_id}-step-c")
    assert step.failed_reason == r.get(failure)          # the step job fails with it too
    assert "ValueError: c failed" in step.stacktrace[-1]  # the handler's error is the cause


def test_the_record_exists_when_the_step_job_fails(bullmq, r, redis_url):
    """Written after the rollbacks and before the job fails: whoever sees the step job's
    "failed" event finds the record."""
    j = Journal()
    wf = (Workflow("Ordered").step("a", j.step("a"), j.rollback("a"))
          .step("b", j.step("b", fail=True)))
    provider = bullmq(wf)
    seen: List[Any] = []
    registry = provider.flow_registry
    events = QueueEvents(f"{bullmq.queue_prefix}.Ordered.steps", connection=redis_url,
                         autorun=False)
    events.on_event(lambda ev: ev.event == "failed" and seen.append(
        (ev.job_id, list(j), r.get(registry.failure_key(ev.job_id.split("-step-")[0])))))
    events.start()
    try:
        handle = provider.execute(wf, {})
        with pytest.raises(WorkflowFailedError):
            handle.result(timeout=GUARD)
        wait_until(lambda: seen, what="the step's failed event")
    finally:
        events.close()
    assert seen == [(f"{handle.id}-step-b", ["a", "b", "rollback:a"],
                     "Step 'b' failed: b failed")]


def test_the_record_is_read_when_the_failed_step_job_is_gone(bullmq):
    """Step jobs removed on failure leave only the record: the waiting process (not the
    one that ran the step) still gets the step, its message and the rollback errors."""
    wf = failing_workflow(Journal())
    bullmq(wf)                                                   # runs the steps
    emitter = bullmq(default_step_options={"remove_on_fail": True})
    emitter.register_emitter("Keyed")
    with pytest.raises(WorkflowFailedError) as info:
        emitter.execute(wf, {}).result(timeout=GUARD)
    err = info.value
    assert (err.primary.step_name, err.primary.message) == ("c", "c failed")
    assert [(e.error_type, e.message) for e in err.rollback_errors] == \
        [("RuntimeError", "rollback a failed")]
