"""Workflows shared with a TypeScript OriJS service, both ways, on one Redis: a real Node
BullMQ plays OriJS's workflow side (node_orijs_workflows.js) for the side keys OriJS
keeps beside a flow: the flow registry (found by id in the other language) and the
failure record (a step failing in one language reaches the other as OriJS words it;
rollback failures arrive decoded)."""
from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from orijs_sync.workflows import Workflow, WorkflowFailedError
from node_stand_in import node_command, node_env, node_process, node_reply
from test_wf_orijs_keys import VECTORS
from wf_helpers import GUARD, Journal, wait_until

HERE = Path(__file__).resolve().parent
NODE_SCRIPT = HERE / "node_orijs_workflows.js"


def _command(command: str, args: Dict[str, Any]) -> list:
    return node_command(NODE_SCRIPT, command, args)


def node(command: str, **args: Any) -> Any:
    proc = subprocess.run(_command(command, args), env=node_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    return node_reply(proc.stdout, proc.stderr)


@pytest.fixture
def node_consumer(tmp_path: Path) -> Iterator[Any]:
    """``consume`` running in the background until it has finished ``count`` flows;
    returns a function of the reply."""
    with contextlib.ExitStack() as stack:
        def start(**args: Any) -> Any:
            ready = tmp_path / "node-ready"
            proc = stack.enter_context(node_process(NODE_SCRIPT, "consume",
                                                    dict(args, readyFile=str(ready))))
            wait_until(lambda: ready.exists() or proc.poll() is not None,
                       what="the Node consumer")
            assert proc.poll() is None, proc.communicate()
            return lambda: node_reply(*proc.communicate(timeout=GUARD))

        yield start


def order(j: Journal, fail_rollback: bool = False) -> Workflow:
    def charge(ctx: Any) -> None:
        j.add("charge")
        raise ValueError("card declined")

    return (Workflow("Order")
            .step("reserve", j.step("reserve", {"held": 2}),
                  j.rollback("reserve", fail=fail_rollback))
            .step("charge", charge))


def test_node_wyhash_matches_the_contract():
    texts = [text for text, _, _ in VECTORS]
    hashes = node("hash", texts=texts)["hashes"]
    assert [(h["decimal"], h["base36"]) for h in hashes] == \
        [(str(decimal), base36) for _, decimal, base36 in VECTORS]


# -- the flow registry ----------------------------------------------------------------------
def test_a_node_flow_is_found_by_id_in_python(bullmq, redis_url):
    wf = Workflow("Shipping").step("pack", lambda ctx: {"box": ctx.data["n"]})
    started = node("execute", url=redis_url, queuePrefix=bullmq.queue_prefix,
                   workflow="Shipping", steps=["pack"], data={"n": 3}, attempts=1,
                   backoff={"type": "fixed", "delay": 100}, wait=False)
    flow_id = started["flowId"]
    stranger = bullmq()                    # has registered no workflow: only the registry
    assert stranger.lookup_flow(flow_id) == "Shipping"
    assert stranger.get_status(flow_id) == "running"
    bullmq(wf)                             # a Python consumer runs the Node flow
    wait_until(lambda: stranger.get_status(flow_id) == "completed", what="the Node flow")


def test_a_python_flow_is_found_by_id_in_node(bullmq, redis_url):
    wf = Workflow("Billing").step("bill", lambda ctx: 42)
    emitter = bullmq()
    emitter.register_emitter("Billing")
    handle = emitter.execute(wf, {})
    seen = node("status", url=redis_url, queuePrefix=bullmq.queue_prefix, flowId=handle.id)
    assert seen == {"name": "Billing", "state": "waiting-children", "status": "running"}
    bullmq(wf)
    assert handle.result(timeout=GUARD) == {"bill": 42}
    seen = node("status", url=redis_url, queuePrefix=bullmq.queue_prefix, flowId=handle.id)
    assert seen == {"name": "Billing", "state": "completed", "status": "completed"}
    assert node("status", url=redis_url, queuePrefix=bullmq.queue_prefix,
                flowId="never-started") == {"name": None, "state": None, "status": "pending"}


# -- the failure record: Python steps, a Node caller ------------------------------------------
def _node_executes_order(bullmq, redis_url) -> Dict[str, Any]:
    result = node("execute", url=redis_url, queuePrefix=bullmq.queue_prefix, workflow="Order",
                  steps=["reserve", "charge"], data={"orderId": "o-1"}, attempts=2,
                  backoff={"type": "fixed", "delay": 200}, wait=True)
    outcome = result["outcome"]
    assert outcome["state"] == "failed" and outcome["fromRecord"] is True
    return outcome


def test_a_python_step_failure_reaches_node_in_orijs_words(bullmq, redis_url):
    j = Journal()
    bullmq(order(j))
    outcome = _node_executes_order(bullmq, redis_url)
    assert outcome["text"] == "Step 'charge' failed: card declined"
    assert outcome["decoded"] == {"message": "Step 'charge' failed: card declined"}
    assert j.count("charge") == 2 and j.count("rollback:reserve") == 1   # rolled back once


def test_a_python_rollback_failure_reaches_node_decoded(bullmq, redis_url):
    bullmq(order(Journal(), fail_rollback=True))
    outcome = _node_executes_order(bullmq, redis_url)
    assert outcome["text"].startswith("ORIJSError:{")
    assert outcome["decoded"] == {
        "message": "Step 'charge' failed: card declined",
        "primary": {"name": "WorkflowStepError",
                    "message": "Step 'charge' failed: card declined", "stepName": "charge"},
        "rollbacks": [{"name": "RuntimeError", "message": "rollback reserve failed"}]}


# -- the failure record: Node steps, a Python caller ------------------------------------------
def _python_executes_order(bullmq, redis_url, node_consumer, **consume: Any
                           ) -> WorkflowFailedError:
    consumer = node_consumer(url=redis_url, queuePrefix=bullmq.queue_prefix, workflow="Order",
                             fail="charge", rollbacks=["reserve"], count=1, **consume)
    emitter = bullmq()
    emitter.register_emitter("Order")
    with pytest.raises(WorkflowFailedError) as info:
        emitter.execute(order(Journal()), {"orderId": "o-2"}).result(timeout=GUARD)
    assert consumer() == {"finished": 1}
    return info.value


def test_a_node_step_failure_reaches_python(bullmq, redis_url, node_consumer, r):
    err = _python_executes_order(bullmq, redis_url, node_consumer)
    assert (err.workflow_name, err.step_name) == ("Order", "charge")
    assert (err.primary.step_name, err.primary.message) == ("charge", "card declined")
    assert err.rollback_errors == []
    assert r.lrange(f"{bullmq.queue_prefix}:node-rollbacks:{err.flow_id}", 0, -1) == \
        ["reserve"]


def test_a_node_rollback_failure_reaches_python_decoded(bullmq, redis_url, node_consumer):
    err = _python_executes_order(bullmq, redis_url, node_consumer, failRollbacks=["reserve"])
    assert (err.primary.step_name, err.primary.message) == ("charge", "card declined")
    assert [(e.step_name, e.error_type, e.message) for e in err.rollback_errors] == \
        [(None, "TypeError", "rollback reserve failed")]
    assert "1 rollback(s) failed" in str(err)
