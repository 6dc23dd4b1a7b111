"""The contract both providers keep: every test runs against InProcessWorkflowProvider
and against BullMQWorkflowProvider on a real Redis."""
from __future__ import annotations

import threading
import time

import pytest

from orijs_sync import errors
from orijs_sync.events import current_meta, propagation_context
from orijs_sync.workflows import (StepFailedError, StepTimeoutError, Workflow,
                                  WorkflowFailedError, WorkflowNotRegisteredError,
                                  WorkflowTimeoutError)
from wf_helpers import GUARD, Journal, wait_until


def test_sequential_steps_see_prior_results(make_provider):
    j = Journal()
    wf = (Workflow("Seq").step("a", j.step("a", {"n": 1}))
          .step("b", lambda ctx: {"n": ctx.get_result("a")["n"] + 1, "saw": sorted(ctx.results)})
          .step("c", lambda ctx: ctx.results["b"]["n"] * 10))
    provider = make_provider(wf)
    handle = provider.execute(wf, {"orderId": "1"})
    assert handle.result(timeout=GUARD) == {"a": {"n": 1}, "b": {"n": 2, "saw": ["a"]}, "c": 20}
    assert handle.status() == "completed"
    assert handle.workflow_name == "Seq" and handle.id


def test_on_complete_makes_the_result(make_provider):
    seen = {}

    def done(ctx):
        seen.update(flow_id=ctx.flow_id, name=ctx.workflow_name, data=ctx.data,
                    step=ctx.step_name)
        return {"total": ctx.get_result("a") + ctx.get_result("b")}

    wf = Workflow("Done", on_complete=done).step("a", lambda ctx: 2).step("b", lambda ctx: 3)
    provider = make_provider(wf)
    handle = provider.execute(wf, {"k": [1, 2]})
    assert handle.result(timeout=GUARD) == {"total": 5}
    assert seen == {"flow_id": handle.id, "name": "Done", "data": {"k": [1, 2]}, "step": None}


def test_context_fields_and_meta(make_provider):
    seen = {}

    def step(ctx):
        seen.update(flow_id=ctx.flow_id, workflow=ctx.workflow_name, data=ctx.data,
                    meta=ctx.meta, step=ctx.step_name, propagated=current_meta())
        ctx.log.info("step ran")
        return "ok"

    wf = Workflow("Ctx").step("only", step)
    provider = make_provider(wf)
    handle = provider.execute(wf, {"x": 1}, meta={"traceId": "t-1"})
    assert handle.result(timeout=GUARD) == {"only": "ok"}
    assert seen == {"flow_id": handle.id, "workflow": "Ctx", "data": {"x": 1},
                    "meta": {"traceId": "t-1"}, "step": "only",
                    "propagated": {"traceId": "t-1"}}
    with propagation_context({"requestId": "r-7"}):
        provider.execute(wf, {"x": 2}).result(timeout=GUARD)
    assert seen["meta"] == {"requestId": "r-7"} == seen["propagated"]


def test_parallel_members_run_concurrently(make_provider):
    barrier = threading.Barrier(2, timeout=GUARD)

    def member(name):
        def run(ctx):
            barrier.wait()       # both members must be running at once to pass
            return {"member": name, "prior": sorted(ctx.results)}
        return run

    wf = (Workflow("Par").step("first", lambda ctx: 1)
          .parallel(("left", member("left")), ("right", member("right")))
          .step("last", lambda ctx: sorted(ctx.results)))
    provider = make_provider(wf)
    result = provider.execute(wf, {}).result(timeout=GUARD)
    assert result == {"first": 1, "left": {"member": "left", "prior": ["first"]},
                      "right": {"member": "right", "prior": ["first"]},
                      "last": ["first", "left", "right"]}


def test_failure_rolls_back_completed_steps_in_reverse_order(make_provider):
    j = Journal()
    wf = (Workflow("Roll").step("a", j.step("a"), j.rollback("a"))
          .step("b", j.step("b"), j.rollback("b"))
          .step("c", j.step("c"))                       # no rollback: skipped
          .step("d", j.step("d"), j.rollback("d"))
          .step("e", j.step("e", fail=True), j.rollback("e"))
          .step("f", j.step("f"), j.rollback("f")))
    provider = make_provider(wf)
    handle = provider.execute(wf, {})
    with pytest.raises(WorkflowFailedError) as info:
        handle.result(timeout=GUARD)
    err = info.value
    assert isinstance(err, errors.RolledBackError)
    assert isinstance(err.primary, StepFailedError)
    assert (err.primary.step_name, err.primary.error_type, err.primary.message) == \
        ("e", "ValueError", "e failed")
    assert err.rollback_errors == [] and err.rolled_back == ["d", "b", "a"]
    assert err.step_name == "e" and err.flow_id == handle.id
    wait_until(lambda: j.count("rollback:a") == 1, what="the last rollback")
    assert list(j) == ["a", "b", "c", "d", "e", "rollback:d", "rollback:b", "rollback:a"]
    wait_until(lambda: handle.status() == "failed", what="failed status")


def test_failed_parallel_group_rolls_back_its_successful_members(make_provider):
    j = Journal()
    wf = (Workflow("ParRoll").step("a", j.step("a"), j.rollback("a"))
          .parallel(("ok1", j.step("ok1"), j.rollback("ok1")),
                    ("bad", j.step("bad", fail=True), j.rollback("bad")),
                    ("ok2", j.step("ok2"), j.rollback("ok2")))
          .step("z", j.step("z"), j.rollback("z")))
    provider = make_provider(wf)
    with pytest.raises(WorkflowFailedError) as info:
        provider.execute(wf, {}).result(timeout=GUARD)
    assert info.value.primary.step_name == "bad"
    assert info.value.rolled_back == ["ok2", "ok1", "a"]
    entries = list(j)
    assert sorted(entries[1:4]) == ["bad", "ok1", "ok2"]     # members, any order
    assert entries[0] == "a" and entries[4:] == ["rollback:ok2", "rollback:ok1", "rollback:a"]
    assert "z" not in entries


def test_rollback_errors_are_collected_and_do_not_stop_other_rollbacks(make_provider):
    j = Journal()
    wf = (Workflow("RollErr").step("a", j.step("a"), j.rollback("a", fail=True))
          .step("b", j.step("b"), j.rollback("b"))
          .step("c", j.step("c"), j.rollback("c", fail=True))
          .step("d", j.step("d", fail=True)))
    provider = make_provider(wf)
    with pytest.raises(WorkflowFailedError) as info:
        provider.execute(wf, {}).result(timeout=GUARD)
    err = info.value
    assert [(e.step_name, e.error_type, e.message) for e in err.rollback_errors] == \
        [("c", "RuntimeError", "rollback c failed"), ("a", "RuntimeError", "rollback a failed")]
    assert err.rolled_back == ["b"]
    assert [e for e in j if str(e).startswith("rollback:")] == \
        ["rollback:c", "rollback:b", "rollback:a"]


def test_rollback_sees_the_completed_results(make_provider):
    refunds = []
    wf = (Workflow("Refund").step("charge", lambda ctx: {"chargeId": "ch_1"},
                                  rollback=lambda ctx: refunds.append(ctx.get_result("charge")))
          .step("ship", lambda ctx: 1 / 0))
    provider = make_provider(wf)
    with pytest.raises(WorkflowFailedError) as info:
        provider.execute(wf, {}).result(timeout=GUARD)
    assert info.value.primary.error_type == "ZeroDivisionError"
    assert refunds == [{"chargeId": "ch_1"}]


def test_on_complete_failure_rolls_back_every_step(make_provider):
    j = Journal()

    def done(ctx):
        raise KeyError("no total")

    wf = (Workflow("DoneFails", on_complete=done).step("a", j.step("a"), j.rollback("a"))
          .step("b", j.step("b"), j.rollback("b")))
    provider = make_provider(wf)
    with pytest.raises(WorkflowFailedError) as info:
        provider.execute(wf, {}).result(timeout=GUARD)
    assert info.value.primary.step_name is None
    assert info.value.primary.error_type == "KeyError"
    assert info.value.rolled_back == ["b", "a"]


def test_idempotency_key_runs_the_workflow_once(make_provider):
    j = Journal()
    gate = threading.Event()

    def slow(ctx):
        j.add("slow")
        assert gate.wait(GUARD)
        return ctx.data["n"]

    wf = Workflow("Idem").step("slow", slow).step("after", j.step("after", "done"))
    provider = make_provider(wf)
    first = provider.execute(wf, {"n": 1}, idempotency_key="order-1")
    second = provider.execute(wf, {"n": 2}, idempotency_key="order-1")
    assert first.id == second.id == "order-1"
    gate.set()
    assert first.result(timeout=GUARD) == second.result(timeout=GUARD) == \
        {"slow": 1, "after": "done"}
    third = provider.execute(wf, {"n": 3}, idempotency_key="order-1")   # after completion
    assert third.result(timeout=GUARD) == {"slow": 1, "after": "done"}
    assert j.count("slow") == 1 and j.count("after") == 1
    other = provider.execute(wf, {"n": 4}, idempotency_key="order-2")
    assert other.result(timeout=GUARD) == {"slow": 4, "after": "done"}


def test_idempotent_failure_is_reported_again(make_provider):
    j = Journal()
    wf = (Workflow("IdemFail").step("a", j.step("a"), j.rollback("a"))
          .step("b", j.step("b", fail=True)))
    provider = make_provider(wf)
    with pytest.raises(WorkflowFailedError):
        provider.execute(wf, {}, idempotency_key="k-1").result(timeout=GUARD)
    with pytest.raises(WorkflowFailedError) as info:
        provider.execute(wf, {}, idempotency_key="k-1").result(timeout=GUARD)
    assert info.value.primary.step_name == "b" and info.value.rolled_back == ["a"]
    assert j.count("b") == 1 and j.count("rollback:a") == 1


def test_retried_step_completes_without_rollback(make_provider):
    j = Journal()
    tries = []

    def flaky(ctx):
        tries.append(ctx.attempt)
        if len(tries) == 1:
            raise ConnectionError("try again")
        return "second time"

    wf = (Workflow("Retry", attempts=1).step("a", j.step("a"), j.rollback("a"))
          .step("flaky", flaky, attempts=2, backoff=0.01))
    provider = make_provider(wf)
    assert provider.execute(wf, {}).result(timeout=GUARD) == {"a": [], "flaky": "second time"}
    assert tries == [1, 2] and "rollback:a" not in list(j)


def test_retried_parallel_group_rolls_back_only_its_members(make_provider):
    j = Journal()
    tries = []

    def flaky(ctx):
        tries.append(1)
        if len(tries) == 1:
            raise ConnectionError("once")
        return "ok"

    wf = (Workflow("ParRetry", attempts=2).step("a", j.step("a"), j.rollback("a"))
          .parallel(("m1", j.step("m1"), j.rollback("m1")), ("m2", flaky)))
    provider = make_provider(wf)
    assert provider.execute(wf, {}).result(timeout=GUARD) == {"a": [], "m1": ["a"], "m2": "ok"}
    assert j.count("m1") == 2 and j.count("rollback:m1") == 1 and j.count("rollback:a") == 0


def test_timeout_is_base_plus_stall_interval(make_provider):
    release = threading.Event()
    wf = Workflow("Slow").step("wait", lambda ctx: release.wait(GUARD) and "released")
    provider = make_provider(wf)
    handle = provider.execute(wf, {}, timeout=0.2)     # effective 0.2 + 5 s
    try:
        with pytest.raises(WorkflowTimeoutError) as info:
            handle.result(timeout=GUARD)
        assert info.value.timeout == pytest.approx(5.2)
        assert isinstance(info.value, errors.TimeoutError) and isinstance(info.value, TimeoutError)
        assert handle.status() == "failed"        # as OriJS says after a timeout
    finally:
        release.set()
    wait_until(lambda: handle.status() == "completed", what="completed after the timeout")


def test_step_timeout(make_provider):
    release = threading.Event()
    j = Journal()
    wf = (Workflow("StepTimeout").step("a", j.step("a"), j.rollback("a"))
          .step("stuck", lambda ctx: release.wait(GUARD)))
    provider = make_provider(wf, step_timeout=0.3)
    try:
        with pytest.raises(WorkflowFailedError) as info:
            provider.execute(wf, {}).result(timeout=GUARD)
    finally:
        release.set()
    assert info.value.primary.error_type == StepTimeoutError.__name__
    assert info.value.rolled_back == ["a"]


def test_results_are_json_and_sanitized(make_provider):
    wf = (Workflow("Sanitize")
          .step("a", lambda ctx: {"__proto__": {"polluted": True}, "ok": {"constructor": 1,
                                                                          "x": (1, 2)}})
          .step("constructor", lambda ctx: "renamed")
          .step("b", lambda ctx: sorted(ctx.results)))
    provider = make_provider(wf)
    result = provider.execute(wf, {}).result(timeout=GUARD)
    assert result == {"a": {"ok": {"x": [1, 2]}}, "_sanitized_constructor": "renamed",
                      "b": ["_sanitized_constructor", "a"]}


def test_step_returning_non_json_fails_the_workflow(make_provider):
    j = Journal()
    wf = Workflow("NonJson").step("a", j.step("a"), j.rollback("a")).step("b", lambda ctx: {1, 2})
    provider = make_provider(wf)
    with pytest.raises(WorkflowFailedError) as info:
        provider.execute(wf, {}).result(timeout=GUARD)
    assert info.value.primary.error_type == "TypeError" and info.value.rolled_back == ["a"]


def test_workflow_without_steps(make_provider):
    wf = Workflow("Empty", on_complete=lambda ctx: {"data": ctx.data, "results": ctx.results})
    provider = make_provider(wf)
    assert provider.execute(wf, [1]).result(timeout=GUARD) == {"data": [1], "results": {}}


def test_refusals(make_provider):
    wf = Workflow("Refuse").step("a", lambda ctx: 1)
    with pytest.raises(ValueError, match="stall_interval"):
        make_provider(wf, stall_interval=4.9)
    provider = make_provider(wf, start=False)
    with pytest.raises(errors.InvalidStateError, match="start"):
        provider.execute(wf, {})
    provider.start()
    with pytest.raises(WorkflowNotRegisteredError):
        provider.execute(Workflow("Unknown").step("a", lambda ctx: 1), {})
    with pytest.raises(TypeError, match="JSON"):
        provider.execute(wf, {"when": object()})
    with pytest.raises(ValueError, match="':'"):
        provider.execute(wf, {}, idempotency_key="a:b")
    assert provider.execute("Refuse", {}).result(timeout=GUARD) == {"a": 1}


def test_stop_fails_pending_handles(make_provider):
    release = threading.Event()
    wf = Workflow("Stopped").step("wait", lambda ctx: release.wait(GUARD) and "released")
    provider = make_provider(wf, concurrency=1)
    running = provider.execute(wf, {})
    queued = provider.execute(wf, {})           # one at a time: this one waits
    stopper = threading.Thread(target=provider.stop, kwargs={"timeout": 10})
    stopper.start()

    wait_until(lambda: provider.state == "stopped", what="stop() under way")
    release.set()                               # the running step may finish now
    stopper.join(GUARD)
    assert not stopper.is_alive()
    with pytest.raises(errors.ShutdownError):
        queued.result(timeout=GUARD)
    assert running.done()
    provider.stop()                             # idempotent
    assert all(v == 0 for v in provider.stats().values())


def test_bounded_flow_states(make_provider):
    wf = Workflow("Bounded").step("a", lambda ctx: ctx.data)
    provider = make_provider(wf, max_flow_states=10, flow_state_cleanup_delay=3600)
    handles = [provider.execute(wf, n) for n in range(40)]
    assert [h.result(timeout=GUARD) for h in handles] == [{"a": n} for n in range(40)]
    stats = provider.stats()
    assert stats["pending"] == 0 and stats["flow_states"] <= 10
    assert stats["timers"] <= 10          # evicted states' cleanup entries are cancelled
    assert handles[-1].status() == "completed"


def test_stop_honours_its_timeout_and_names_what_still_runs(make_provider, caplog):
    """Item 7: stop(timeout=1) returns at the deadline although a step still runs."""
    release, started = threading.Event(), threading.Event()

    def stuck(ctx):
        started.set()
        return release.wait(GUARD) and "released"

    wf = Workflow("Stuck").step("stuck", stuck)
    provider = make_provider(wf)
    handle = provider.execute(wf, {})
    try:
        assert started.wait(GUARD)
        began = time.monotonic()
        provider.stop(timeout=1)
        took = time.monotonic() - began
        assert took < GUARD / 2, f"stop(timeout=1) took {took:.1f}s"
        assert "still running" in caplog.text
        with pytest.raises(errors.ShutdownError):
            handle.result(timeout=GUARD)
    finally:
        release.set()
