"""The pieces without Redis: definitions, FlowBuilder, result wrappers, StepRegistry,
the timer, FlowHandle."""
from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from orijs_sync import errors
from orijs_sync.workflows import (FlowBuilder, FlowHandle, StepNotFoundError, StepRegistry,
                                  Workflow, flatten_child_results, is_parallel_result_wrapper,
                                  is_step_result_wrapper, sanitize, validate_step_name)
from orijs_sync.base.timer import Timer
from orijs_sync.workflows.results import parallel_result_wrapper, step_result_wrapper
from wf_helpers import wait_until


def noop(ctx):
    return None


# -- definitions ---------------------------------------------------------------
@pytest.mark.parametrize("name", ["a", "A1", "charge-card", "step_2", "x" * 128, "9lives"])
def test_valid_step_names(name):
    assert validate_step_name(name) == name
    Workflow("W").step(name, noop)


@pytest.mark.parametrize("name", ["", "-a", "_a", "a b", "a:b", "a.b", "a,b", "x" * 129, "é"])
def test_invalid_step_names(name):
    with pytest.raises(ValueError, match="invalid step name"):
        Workflow("W").step(name, noop)


def test_reserved_and_mistyped_step_names():
    with pytest.raises(ValueError, match="reserved"):
        validate_step_name("__parallel__")
    with pytest.raises(TypeError):
        validate_step_name(3)


@pytest.mark.parametrize("name", ["", "a.b", "a:b", "Order Workflow", "_x"])
def test_invalid_workflow_names(name):
    with pytest.raises(ValueError, match="invalid workflow name"):
        Workflow(name)


def test_builder_groups_and_checks():
    wf = (Workflow("Order").step("a", noop).step("b", noop)
          .parallel(("c", noop), ("d", noop, noop)).step("e", noop))
    assert wf.shape() == [("sequential", ["a", "b"]), ("parallel", ["c", "d"]),
                          ("sequential", ["e"])]
    assert wf.step_names == ["a", "b", "c", "d", "e"]
    assert wf.groups[1].job_step_name == "__parallel__:c,d"
    assert wf.steps["d"].rollback is noop
    with pytest.raises(ValueError, match="already has a step named 'a'"):
        wf.step("a", noop)
    with pytest.raises(ValueError, match="already has a step named 'x'"):
        Workflow("P").parallel(("x", noop), ("x", noop))
    with pytest.raises(TypeError, match="callable"):
        Workflow("P").step("a", "not a function")
    with pytest.raises(TypeError, match="rollback"):
        Workflow("P").step("a", noop, rollback=1)
    with pytest.raises(ValueError, match="two or more"):
        Workflow("P").parallel()
    with pytest.raises(TypeError, match=r"items\[0\]"):
        Workflow("P").parallel(("a",))
    with pytest.raises(ValueError, match="attempts"):
        Workflow("P").step("a", noop, attempts=0)
    with pytest.raises(TypeError, match="on_complete"):
        Workflow("P", on_complete=5)


# -- FlowBuilder -------------------------------------------------------------------
def test_flow_builder_nests_steps_and_wraps_parallel_groups():
    wf = (Workflow("Order", attempts=3, backoff=1).step("a", noop)
          .parallel(("b", noop), ("c", noop)).step("d", noop, attempts=5))
    builder = FlowBuilder("workflow")
    tree = builder.build(wf, "k1", {"x": 1}, {"traceId": "t"}, {"remove_on_fail": 10})
    assert (tree["name"], tree["queue_name"], tree["opts"]) == \
        ("Order", "workflow.Order", {"job_id": "k1", "attempts": 1})
    assert tree["data"] == {"type": "workflow", "version": "1", "flowId": "k1",
                            "workflowData": {"x": 1}, "stepResults": {},
                            "meta": {"traceId": "t"}}
    [d] = tree["children"]
    [group] = d["children"]
    [a] = group["children"]
    assert "children" not in a
    assert [n["name"] for n in (d, group, a)] == ["d", "__parallel__:b,c", "a"]
    assert {n["queue_name"] for n in (d, group, a)} == {"workflow.Order.steps"}
    assert [n["opts"]["job_id"] for n in (d, group, a)] == \
        ["k1-step-d", "k1-step-__parallel__-b,c", "k1-step-a"]
    assert all(n["opts"]["fail_parent_on_failure"] is True for n in (d, group, a))
    assert d["opts"]["attempts"] == 5 and a["opts"]["attempts"] == 3
    assert a["opts"]["backoff"] == 1 and a["opts"]["remove_on_fail"] == 10
    assert group["data"] == {"type": "step", "version": "1", "flowId": "k1",
                             "stepName": "__parallel__:b,c", "workflowData": {"x": 1},
                             "meta": {"traceId": "t"}}
    empty = builder.build(Workflow("Empty"), "f", None)
    assert "children" not in empty and "meta" not in empty["data"]
    with pytest.raises(ValueError):
        FlowBuilder("bad:prefix")


# -- result wrappers ---------------------------------------------------------------
def test_flatten_child_results():
    first = step_result_wrapper("a", {"v": 1}, {})
    group = parallel_result_wrapper({"b": 2, "c": [3]}, {"a": {"v": 1}})
    last = step_result_wrapper("d", "done", {"a": {"v": 1}, "b": 2, "c": [3]})
    assert is_step_result_wrapper(first) and not is_parallel_result_wrapper(first)
    assert is_parallel_result_wrapper(group) and not is_step_result_wrapper(group)
    assert flatten_child_results({"bull:q:1": group}) == {"a": {"v": 1}, "b": 2, "c": [3]}
    assert flatten_child_results({"bull:q:2": last}) == \
        {"a": {"v": 1}, "b": 2, "c": [3], "d": "done"}
    assert flatten_child_results({"bull:q:3": "not a wrapper", "bull:q:4": {"x": 1}}) == {}


def test_dangerous_keys_are_sanitized():
    assert sanitize({"__proto__": 1, "a": [{"constructor": 2, "ok": 3}],
                     "b": {"prototype": {}, "c": None}}) == {"a": [{"ok": 3}], "b": {"c": None}}
    wrapper = step_result_wrapper("constructor", {"__proto__": {"admin": True}, "v": 1},
                                  {"prototype": "x", "fine": {"constructor": 0}})
    assert flatten_child_results({"k": wrapper}) == {
        "_sanitized_prototype": "x", "fine": {}, "_sanitized_constructor": {"v": 1}}
    group = parallel_result_wrapper({"__proto__": 1, "ok": {"__proto__": 2}}, {})
    assert flatten_child_results({"k": group}) == {"_sanitized___proto__": 1, "ok": {}}


# -- StepRegistry ------------------------------------------------------------------
def test_step_registry():
    registry = StepRegistry()
    registry.register("W", "a", noop)
    registry.register("W", "b", noop, rollback=print)
    assert registry.get("W", "a") is noop and registry.get_step("W", "b").rollback is print
    assert registry.get_rollback("W", "a") is None and registry.get_rollback("X", "a") is None
    assert registry.has("W", "a") and not registry.has("W", "z")
    assert registry.get_workflow_steps("W") == ["a", "b"] and registry.get_workflow_steps("X") == []
    with pytest.raises(StepNotFoundError) as info:
        registry.get("W", "z")
    assert isinstance(info.value, LookupError) and info.value.step_name == "z"
    with pytest.raises(ValueError):
        registry.register("W", "__x", noop)
    registry.clear()
    assert not registry.has("W", "a")


# -- timer and handle --------------------------------------------------------------
def test_one_timer_thread_runs_entries_by_deadline():
    timer = Timer("test-timer").start()
    ran = []
    lock = threading.Lock()

    def record(tag):
        with lock:
            ran.append(tag)

    try:
        timer.call_later(0.06, lambda: record("third"))
        timer.call_later(0.02, lambda: record("first"))
        cancelled = timer.call_later(0.01, lambda: record("cancelled"))
        timer.call_later(0.04, lambda: record("second"))
        assert timer.cancel(cancelled) and not timer.cancel(cancelled)
        wait_until(lambda: len(ran) == 3, what="three callbacks")
        assert ran == ["first", "second", "third"] and len(timer) == 0
        assert len([t for t in threading.enumerate() if t.name == "test-timer"]) == 1
    finally:
        timer.stop()
    assert not [t for t in threading.enumerate() if t.name == "test-timer"]
    with pytest.raises(errors.ShutdownError):
        timer.call_later(1, lambda: None)


def test_flow_handle_is_a_future():
    handle = FlowHandle("f-1", "W", lambda flow_id, name: f"{name}:{flow_id}")
    assert isinstance(handle, Future) and handle.id == "f-1" and handle.status() == "W:f-1"
    assert handle.cancel() is False and not handle.done()
    handle._settle(result=1)
    handle._settle(result=2)            # settle once
    assert handle.result(timeout=0) == 1
