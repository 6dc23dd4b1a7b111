"""OriJS parity for a team porting a TypeScript service: the reference's hooks,
defaults and lookups, on both providers (in-process and BullMQ)."""
from __future__ import annotations

import logging
import threading
from typing import Any, List

import pytest

from orijs_sync import FlowProducer, Queue, QueueEvents, Worker, errors
from orijs_sync.workflows import (Workflow, WorkflowFailedError, WorkflowNotFoundError,
                                  WorkflowNotRegisteredError)
from wf_helpers import GUARD, Journal, wait_until


def test_on_error_runs_once_after_the_rollbacks_with_the_results_so_far(make_provider):
    j = Journal()
    seen: List[Any] = []

    def on_error(ctx: Any, error: BaseException) -> None:
        j.add("on_error")
        seen.append((ctx.flow_id, ctx.workflow_name, ctx.data, ctx.meta, ctx.step_name,
                     dict(ctx.results), error))
        raise RuntimeError("the hook itself broke")       # logged, not the caller's error

    wf = (Workflow("Hooked", on_error=on_error)
          .step("a", j.step("a", {"n": 1}), j.rollback("a"))
          .parallel(("b", j.step("b", 2)), ("c", j.step("c", fail=True)))
          .step("d", j.step("d")))
    provider = make_provider(wf)
    handle = provider.execute(wf, {"orderId": 7}, meta={"traceId": "t-9"})
    with pytest.raises(WorkflowFailedError) as info:
        handle.result(timeout=GUARD)
    assert (info.value.primary.step_name, info.value.primary.message) == ("c", "c failed")
    assert seen == [(handle.id, "Hooked", {"orderId": 7}, {"traceId": "t-9"}, "c",
                     {"a": {"n": 1}, "b": 2}, info.value)]
    entries = list(j)
    assert sorted(entries[1:3]) == ["b", "c"] and entries[3:] == ["rollback:a", "on_error"]


def test_on_error_must_be_callable():
    with pytest.raises(TypeError, match="on_error"):
        Workflow("Bad", on_error="not a function")  # type: ignore[arg-type]


# -- get_status / get_result / get_handle -------------------------------------------------
def test_status_of_a_flow_found_nowhere_is_pending(make_provider):
    provider = make_provider(Workflow("Known").step("a", lambda ctx: 1))
    assert provider.get_status("never-started") == "pending"


def test_get_result_and_get_handle_of_a_flow(make_provider):
    gate = threading.Event()
    wf = Workflow("Lookup").step("a", lambda ctx: gate.wait(GUARD) and ctx.data["n"])
    bad = Workflow("LookupBad").step("a", Journal().step("a", fail=True))
    provider = make_provider(wf, bad)
    running = provider.execute(wf, {"n": 5})
    later = provider.get_handle(running.id)                 # while it runs
    assert (later.id, later.workflow_name, later.done()) == (running.id, "Lookup", False)
    gate.set()
    assert later.result(timeout=GUARD) == {"a": 5} == running.result(timeout=GUARD)
    assert provider.get_result(running.id) == {"a": 5}      # finished: at once
    assert provider.get_handle(running.id, "Lookup").result(timeout=GUARD) == {"a": 5}
    failed = provider.execute(bad, {})
    with pytest.raises(WorkflowFailedError):
        failed.result(timeout=GUARD)
    with pytest.raises(WorkflowFailedError) as info:
        provider.get_result(failed.id)
    assert info.value.primary.step_name == "a"
    with pytest.raises(WorkflowNotFoundError):
        provider.get_handle("never-started")
    assert isinstance(WorkflowNotFoundError("x"), errors.OrijsError)


def test_get_result_from_a_process_that_knows_no_workflow(bullmq):
    gate = threading.Event()
    wf = Workflow("Far").step("a", lambda ctx: gate.wait(GUARD) and "done")
    bad = Workflow("FarBad").step("a", Journal().step("a", fail=True), attempts=1)
    runner = bullmq(wf, bad)
    running, failed = runner.execute(wf, {}), runner.execute(bad, {})
    # execute() returns before its flow is added (on a sender lane): another process finds
    # a flow once it is in Redis
    wait_until(lambda: "pending" not in (running.status(), failed.status()), GUARD,
               "both flows to be added")
    stranger = bullmq()                    # finds them through the registry key
    handle = stranger.get_handle(running.id)
    assert handle.workflow_name == "Far" and not handle.done()
    gate.set()
    assert handle.result(timeout=GUARD) == {"a": "done"}
    assert stranger.get_result(running.id) == {"a": "done"}
    with pytest.raises(WorkflowFailedError) as info:
        stranger.get_result(failed.id)
    assert (info.value.primary.step_name, info.value.primary.message) == ("a", "a failed")


# -- step retry defaults --------------------------------------------------------------------
def test_step_retry_defaults_are_orijs_and_overridable(make_provider, redis_url):
    runs = Journal()
    default = Workflow("RetryDefault").step("a", runs.step("a", fail=True))
    per_workflow = Workflow("RetryWf", attempts=2, backoff=0.01).step("b",
                                                                       runs.step("b", fail=True))
    per_step = (Workflow("RetryStep", attempts=2, backoff=0.01)
                .step("c", runs.step("c", fail=True), attempts=1))
    provider = make_provider(default, per_workflow, per_step, default_step_options=None)
    assert provider.default_step_options == {"attempts": 3,
                                             "backoff": {"type": "exponential", "delay": 1.0}}
    per_provider = Workflow("RetryProvider").step("d", runs.step("d", fail=True))
    other = make_provider(per_provider, default_step_options={"attempts": 2, "backoff": 0.01})
    handles = [provider.execute(wf, {}) for wf in (default, per_workflow, per_step)]
    handles.append(other.execute(per_provider, {}))
    for handle in handles:
        with pytest.raises(WorkflowFailedError):
            handle.result(timeout=GUARD)
    assert [runs.count(n) for n in "abcd"] == [3, 2, 1, 2]
    if make_provider.kind == "bullmq":       # in Redis as OriJS writes them: milliseconds
        with Queue(f"{make_provider.queue_prefix}.RetryDefault.steps",
                   connection=redis_url) as steps:
            opts = steps.get_job(f"{handles[0].id}-step-a").opts
        assert (opts["attempts"], opts["backoff"]) == (3, {"type": "exponential",
                                                           "delay": 1000})


# -- local state bounds: 0 means off, as in OriJS -------------------------------------------
def test_max_flow_states_zero_is_no_limit_and_cleanup_delay_zero_never_cleans(make_provider):
    wf = Workflow("Kept").step("a", lambda ctx: ctx.data)
    provider = make_provider(wf, max_flow_states=0, flow_state_cleanup_delay=0)
    handles = [provider.execute(wf, n) for n in range(3)]
    assert [h.result(timeout=GUARD) for h in handles] == [{"a": n} for n in range(3)]
    wait_until(lambda: provider.stats()["timers"] == 0, what="no timer left")
    assert provider.stats()["flow_states"] == 3
    assert [provider._local_status(h.id, "Kept") for h in handles] == ["completed"] * 3
    with pytest.raises(ValueError, match="max_flow_states"):
        make_provider(wf, max_flow_states=-1, start=False)


def test_per_workflow_concurrency_at_registration(make_provider):
    """Two flows of a workflow registered with concurrency=1 never run at once (each
    step waits up to 3 s for the other); another workflow keeps the provider's."""
    lock, active, peaks = threading.Lock(), [0], {"One": 0, "Many": 0}
    both = threading.Barrier(2)

    def step(name: str) -> Any:
        def run(ctx: Any) -> int:
            with lock:
                active[0] += 1
                peaks[name] = max(peaks[name], active[0])
            try:
                both.wait(timeout=3.0)            # met only if two run at once
            except threading.BrokenBarrierError:
                pass
            finally:
                with lock:
                    active[0] -= 1
            return 1
        return run

    one, many = Workflow("One").step("a", step("One")), Workflow("Many").step("a", step("Many"))
    provider = make_provider(start=False)
    provider.register(one, concurrency=1)
    provider.register(many)
    provider.start()
    for wf in (one, many):
        both.reset()
        handles = [provider.execute(wf, {}) for _ in range(2)]
        assert [h.result(timeout=GUARD) for h in handles] == [{"a": 1}] * 2
    assert peaks == {"One": 1, "Many": 2}
    with pytest.raises(ValueError, match="concurrency"):
        provider.register(many, concurrency=0)


# -- emitter-only processes declare the shape -------------------------------------------------
def test_an_emitter_declares_the_shape_without_handlers(make_provider):
    shape = Workflow("Declared").step("a").parallel("b", "c").step("d")
    full = (Workflow("Declared").step("a", lambda ctx: 1)
            .parallel(("b", lambda ctx: 2), ("c", lambda ctx: 3))
            .step("d", lambda ctx: sorted(ctx.results)))
    assert shape.shape() == full.shape() and shape.declared_only == ["a", "b", "c", "d"]
    expected = {"a": 1, "b": 2, "c": 3, "d": ["a", "b", "c"]}
    if make_provider.kind == "bullmq":
        emitter = make_provider()
        emitter.register_emitter(shape)                 # no step callables here
        make_provider(full)                             # another process runs it
    else:
        emitter = make_provider(full)                   # in-process: the runner itself
    assert emitter.execute("Declared", {}).result(timeout=GUARD) == expected
    with pytest.raises(TypeError, match="register_emitter"):
        emitter.register(shape)
    with pytest.raises(TypeError, match="rollback but no handler"):
        Workflow("Bad").step("a", None, lambda ctx: None)


def test_an_unregistered_name_is_refused_before_anything_is_written(make_provider):
    provider = make_provider()
    provider.register_emitter("ByNameOnly")            # a name alone: no shape to build
    with pytest.raises(WorkflowNotRegisteredError, match="register_emitter"):
        provider.execute("ByNameOnly", {})


# -- the reference's injectables --------------------------------------------------------------
def test_the_provider_logs_through_the_given_logger(make_provider, caplog):
    j = Journal()
    wf = (Workflow("Logged").step("a", j.step("a"), j.rollback("a", fail=True))
          .step("b", j.step("b", fail=True)))
    provider = make_provider(wf, logger=logging.getLogger("my_service.workflows"))
    with caplog.at_level(logging.INFO, logger="my_service.workflows"):
        with pytest.raises(WorkflowFailedError):
            provider.execute(wf, {}).result(timeout=GUARD)
    mine = [r.getMessage() for r in caplog.records if r.name == "my_service.workflows"]
    assert any("rollback of step 'a' failed" in m for m in mine), mine
    assert any("rollbacks done" in m for m in mine), mine


def test_the_bullmq_provider_takes_the_component_classes(bullmq):
    made: List[str] = []

    def recording(base: Any) -> Any:
        class Recording(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                made.append(base.__name__)
        return Recording

    wf = Workflow("Injected").step("a", lambda ctx: 1)
    provider = bullmq(wf, queue_class=recording(Queue), worker_class=recording(Worker),
                      queue_events_class=recording(QueueEvents),
                      flow_producer_class=recording(FlowProducer))
    assert provider.execute(wf, {}).result(timeout=GUARD) == {"a": 1}
    assert sorted(set(made)) == ["FlowProducer", "Queue", "QueueEvents", "Worker"]
    assert made.count("Worker") == 2 and made.count("QueueEvents") == 1
