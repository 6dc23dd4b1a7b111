"""Property suite: every public entry point given generated invalid values raises an
``errors.OrijsError`` that is also a ``TypeError``/``ValueError``, whose message names
the argument, and leaves the Redis keyspace exactly as it was.

One parametrized test drives every case (``CASES``); each case draws its bad value
from a hypothesis strategy. ``EXAMPLES`` per case x the cases >= 1,500 examples.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterator, NamedTuple

import pytest
import redis
from bad_values import (
    Case,
    assert_refused_by_name,
    bad_bools,
    bad_ints,
    bad_mappings,
    bad_names,
    bad_seconds,
    const,
    junk,
    not_callable,
    not_json,
    typos,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orijs_sync import FlowProducer, Queue, QueueEvents, Worker
from orijs_sync import options as job_options
from orijs_sync._worker_events import LISTENER_EVENTS
from orijs_sync.base.validate import MAX_PRIORITY
from orijs_sync.events import BullMQEventProvider, InProcessEventProvider
from orijs_sync.workflows import BullMQWorkflowProvider, InProcessWorkflowProvider, Workflow

EXAMPLES = 40


def bad_option_values() -> st.SearchStrategy[Any]:
    """(option, bad value) for Queue.add keywords; the message must name the option."""
    return st.one_of(
        st.tuples(st.just("delay"), bad_seconds),
        st.tuples(st.just("priority"), bad_ints(0, MAX_PRIORITY).filter(lambda v: v is not None)),
        st.tuples(st.just("attempts"), bad_ints(1).filter(lambda v: v is not None)),
        st.tuples(st.just("job_id"), st.one_of(junk.filter(lambda v: not isinstance(v, str)),
                                               st.just(""), st.just("a:b"), st.just("12"))),
        st.tuples(st.just("stack_trace_limit"), bad_ints(0).filter(lambda v: v is not None)),
        st.tuples(st.just("keep_logs"), bad_ints(0).filter(lambda v: v is not None)),
        st.tuples(st.just("lifo"), bad_bools()),
        st.tuples(st.just("remove_on_complete"),
                  st.one_of(st.integers(max_value=-1), st.text(max_size=3), st.floats(),
                            st.just({"age": math.inf}), st.just({"count": -1}))),
        st.tuples(st.just("timestamp"), st.one_of(st.just(math.nan), st.just(math.inf),
                                                  st.integers(max_value=-1), st.text(max_size=2))),
    )


def bad_backoffs() -> st.SearchStrategy[Any]:
    """(backoff, the name the message must carry)."""
    return st.one_of(
        st.tuples(st.builds(lambda k: {"type": "fixed", "delay": 1, k: 2},
                            typos(job_options.BACKOFF_KEYS)), st.just("backoff")),
        st.tuples(st.builds(lambda j: {"type": "fixed", "delay": 1, "jitter": j},
                            st.one_of(st.floats(min_value=1.0001), st.floats(max_value=-1e-9),
                                      st.just(math.nan), st.text(max_size=2))),
                  st.just("backoff.jitter")),
        st.tuples(st.builds(lambda d: {"type": "exponential", "delay": d}, bad_seconds),
                  st.just("backoff.delay")),
        st.tuples(bad_mappings.filter(lambda v: not isinstance(v, (int, float))),
                  st.just("backoff")),
    )


# -- the world the cases act on ------------------------------------------------------
class World(NamedTuple):
    url: str
    r: redis.Redis
    queue: Queue
    job: Any
    flows: FlowProducer
    events: BullMQEventProvider
    local_events: InProcessEventProvider
    workflows: BullMQWorkflowProvider
    local_workflows: InProcessWorkflowProvider
    workflow: Workflow


@pytest.fixture(scope="module")
def world(redis_url: str) -> Iterator[World]:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    queue = Queue("validation-props", connection=redis_url)
    job = queue.add("seed", {"n": 1}, delay=3600)
    workflow = Workflow("validation-wf").step("one", lambda ctx: 1)
    events = BullMQEventProvider(redis_url, queue_prefix="validation-ev").start()
    local_events = InProcessEventProvider().start()
    workflows = BullMQWorkflowProvider(redis_url, queue_prefix="validation-wf")
    workflows.register_emitter(workflow.name)       # no worker: nothing runs, nothing writes
    workflows.start()
    local_workflows = InProcessWorkflowProvider()
    local_workflows.register(workflow)
    local_workflows.start()
    try:
        yield World(redis_url, r, queue, job, FlowProducer(redis_url), events, local_events,
                    workflows, local_workflows, workflow)
    finally:
        workflows.stop(timeout=5)
        local_workflows.stop(timeout=5)
        events.stop(timeout=5)
        local_events.stop(timeout=5)
        queue.obliterate(force=True)
        queue.close()
        r.close()


def option_arg(v: Any, *options: str) -> str:
    """An options dict with a typo is refused naming the typo, anything else by name."""
    name, value = v
    return next(iter(value)) if name in options and isinstance(value, dict) else name


def worker(w: World, **kw: Any) -> Worker:
    kw.setdefault("name", "validation-w")
    return Worker(kw.pop("name"), kw.pop("processor", lambda job: None), connection=w.url, **kw)


CASES: Dict[str, Case] = {
    # -- core: Queue ------------------------------------------------------------------
    "Queue.name": Case(bad_names, lambda w, v: Queue(v, connection=w.url), const("name")),
    "Queue.default_job_options": Case(
        st.one_of(bad_mappings, st.builds(lambda k: {k: 3}, typos(job_options.KNOWN))),
        lambda w, v: Queue("validation-x", connection=w.url, default_job_options=v),
        lambda v: v and isinstance(v, dict) and next(iter(v)) or "default_job_options"),
    "Queue.add.name": Case(junk.filter(lambda v: not isinstance(v, str)),
                           lambda w, v: w.queue.add(v, {}), const("name")),
    "Queue.add.option": Case(bad_option_values(),
                             lambda w, v: w.queue.add("x", {}, **{v[0]: v[1]}), lambda v: v[0]),
    "Queue.add.typo": Case(typos(job_options.KNOWN),
                           lambda w, v: w.queue.add("x", {}, **{v: 1}), lambda v: v),
    "Queue.add.backoff": Case(bad_backoffs(),
                              lambda w, v: w.queue.add("x", {}, backoff=v[0]), lambda v: v[1]),
    "Queue.add.data": Case(not_json, lambda w, v: w.queue.add("x", v), const("data")),
    "Queue.add_bulk.item": Case(
        st.one_of(st.builds(lambda k: [{"name": "x", k: {}}], typos({"name", "data", "opts"})),
                  st.builds(lambda o: [{"name": "x", "opts": o}], bad_mappings),
                  st.builds(lambda v: [{"name": "x"}, v], junk)),
        lambda w, v: w.queue.add_bulk(v),
        lambda v: next((k for k in v[0] if k not in ("name", "data", "opts")), "jobs")),
    "Queue.getters": Case(
        st.one_of(st.tuples(st.just("get_job"), st.one_of(st.none(), st.just(""), st.floats(),
                                                          st.lists(st.none()))),
                  st.tuples(st.just("get_jobs"), st.one_of(st.text(max_size=4), junk).filter(
                      lambda v: v != [])),
                  st.tuples(st.just("clean"), bad_seconds),
                  st.tuples(st.just("get_job_counts"), st.text(max_size=5))),
        lambda w, v: {"get_job": lambda: w.queue.get_job(v[1]),
                      "get_jobs": lambda: w.queue.get_jobs(v[1]),
                      "clean": lambda: w.queue.clean(v[1]),
                      "get_job_counts": lambda: w.queue.get_job_counts(v[1])}[v[0]](),
        lambda v: {"get_job": "job_id", "get_jobs": "states", "clean": "grace",
                   "get_job_counts": "types"}[v[0]]),
    "Queue.remove_obliterate": Case(
        st.one_of(st.tuples(st.just("batch"), bad_ints(1)), st.tuples(st.just("force"),
                                                                      bad_bools())),
        lambda w, v: w.queue.obliterate(**{v[0]: v[1]}), lambda v: v[0]),
    "Queue.upsert_job_scheduler": Case(
        st.one_of(st.tuples(st.just("every"), bad_seconds.filter(lambda v: v is not None)),
                  st.tuples(st.just("pattern"), st.one_of(junk.filter(
                      lambda v: not isinstance(v, str)), st.text(max_size=8))),
                  st.tuples(st.just("template"), st.one_of(
                      bad_mappings, st.builds(lambda k: {k: 1}, typos({"name", "data", "opts"})))),
                  st.tuples(st.just("limit"), bad_ints(1).filter(lambda v: v is not None))),
        lambda w, v: w.queue.upsert_job_scheduler(
            "validation-s", **({v[0]: v[1]} if v[0] in ("every", "pattern")
                               else {"every": 60, v[0]: v[1]})),
        lambda v: (next(iter(v[1])) if v[0] == "template" and isinstance(v[1], dict)
                   else v[0])),
    # -- core: Job ------------------------------------------------------------------
    "Job.change_priority": Case(bad_ints(0, MAX_PRIORITY),
                                lambda w, v: w.job.change_priority(v), const("priority")),
    "Job.change_delay": Case(bad_seconds, lambda w, v: w.job.change_delay(v), const("delay")),
    "Job.update_progress": Case(not_json, lambda w, v: w.job.update_progress(v),
                                const("progress")),
    "Job.update_data": Case(not_json, lambda w, v: w.job.update_data(v), const("data")),
    "Job.retry": Case(st.text(max_size=6).filter(lambda s: s not in ("failed", "completed")),
                      lambda w, v: w.job.retry(v), const("state")),
    # -- core: Worker, QueueEvents, FlowProducer --------------------------------------
    "Worker.name": Case(bad_names, lambda w, v: worker(w, name=v), const("name")),
    "Worker.processor": Case(not_callable.filter(lambda v: v is not None),  # None: a manual worker
                             lambda w, v: worker(w, processor=v),
                             const("processor")),
    "Worker.durations": Case(
        st.tuples(st.sampled_from(["lock_duration", "stalled_interval", "drain_delay"]),
                  bad_seconds),
        lambda w, v: worker(w, **{v[0]: v[1]}), lambda v: v[0]),
    "Worker.counts": Case(
        st.one_of(st.tuples(st.just("concurrency"), bad_ints(1, 10_000).filter(
                      lambda v: v is not None)),
                  st.tuples(st.just("max_stalled_count"), bad_ints(0).filter(
                      lambda v: v is not None)),
                  st.tuples(st.just("processes"), bad_ints(1, 1024).filter(
                      lambda v: v is not None)),
                  st.tuples(st.just("max_jobs_per_process"), bad_ints(1).filter(
                      lambda v: v is not None))),
        lambda w, v: worker(w, **{v[0]: v[1]}), lambda v: v[0]),
    "Worker.job_timeout": Case(
        st.one_of(bad_seconds.filter(lambda v: v is not None), st.just(0)),
        lambda w, v: worker(w, processes=1, job_timeout=v), const("job_timeout")),
    "Worker.limiter": Case(
        st.one_of(st.tuples(st.builds(lambda k: {"max": 1, "duration": 1, k: 1},
                                      typos({"max", "duration"})), st.just("limiter")),
                  st.tuples(st.builds(lambda d: {"max": 1, "duration": d}, bad_seconds),
                            st.just("limiter.duration")),
                  st.tuples(st.builds(lambda m: {"max": m, "duration": 1}, bad_ints(1)),
                            st.just("limiter.max")),
                  st.tuples(bad_mappings, st.just("limiter"))),
        lambda w, v: worker(w, limiter=v[0]), lambda v: v[1]),
    "QueueEvents": Case(
        st.one_of(st.tuples(st.just("names"), st.one_of(
                      bad_names.filter(lambda v: v is not None and not isinstance(v, list)),
                      st.lists(st.sampled_from(["", " ", "a:b", 7]), min_size=1, max_size=2))),
                  st.tuples(st.just("block_timeout"), bad_seconds),
                  st.tuples(st.just("recent_outcomes"), bad_ints(1))),
        lambda w, v: QueueEvents(v[1] if v[0] == "names" else "validation-qe", w.url,
                                 autorun=False, **({} if v[0] == "names" else {v[0]: v[1]})),
        lambda v: v[0]),
    "FlowProducer.add": Case(
        st.one_of(st.tuples(st.builds(lambda q: {"name": "p", "queue_name": q}, bad_names),
                            st.just("queue_name")),
                  st.tuples(st.builds(lambda o: {"name": "p", "queue_name": "validation-f",
                                                 "opts": o}, bad_mappings), st.just("opts")),
                  st.tuples(st.builds(lambda k: {"name": "p", "queue_name": "validation-f",
                                                 "children": [{"name": "c", k: 1}]},
                                      typos({"name", "queue_name", "data", "opts", "children"})),
                            st.just("children[0]"))),
        lambda w, v: w.flows.add(v[0]), lambda v: v[1]),
    # -- events ---------------------------------------------------------------------
    "BullMQEventProvider.init": Case(
        st.one_of(st.tuples(st.just("default_timeout"), bad_seconds),
                  st.tuples(st.just("queue_prefix"), bad_names),
                  st.tuples(st.just("default_job_options"), st.one_of(
                      bad_mappings, st.builds(lambda k: {k: 3}, typos(job_options.KNOWN)))),
                  st.tuples(st.just("default_worker_options"), st.builds(
                      lambda k: {k: 3}, typos({"concurrency", "lock_duration", "limiter"})))),
        lambda w, v: BullMQEventProvider(w.url, **{v[0]: v[1]}),
        lambda v: option_arg(v, "default_job_options", "default_worker_options")),
    "emit": Case(
        st.one_of(st.tuples(st.just("event_name"), bad_names),
                  st.tuples(st.just("meta"), bad_mappings),
                  st.tuples(st.just("delay"), bad_seconds),
                  st.tuples(st.just("timeout"), bad_seconds),
                  st.tuples(st.just("idempotency_key"), st.one_of(
                      junk.filter(lambda v: not isinstance(v, str)), st.just("a:b"),
                      st.just(""))),
                  st.tuples(st.just("causation_id"), junk.filter(lambda v: not isinstance(v, str))),
                  st.tuples(st.just("payload"), not_json),
                  st.tuples(st.just("expects_result"), bad_bools())),
        lambda w, v: _emit(w.events, v), lambda v: v[0]),
    "emit.in_process": Case(
        st.one_of(st.tuples(st.just("meta"), bad_mappings),
                  st.tuples(st.just("timeout"), bad_seconds),
                  st.tuples(st.just("idempotency_key"), st.one_of(
                      junk.filter(lambda v: not isinstance(v, str)), st.just("a:b")))),
        lambda w, v: _emit(w.local_events, v), lambda v: v[0]),
    "subscribe": Case(
        st.one_of(st.tuples(st.just("event_name"), bad_names),
                  st.tuples(st.just("handler"), not_callable)),
        lambda w, v: (w.events.subscribe(v[1], print) if v[0] == "event_name"
                      else w.events.subscribe("validation.sub", v[1])),
        lambda v: v[0]),
    "schedule_event": Case(
        st.one_of(st.tuples(st.just("every"), bad_seconds),
                  st.tuples(st.just("cron"), st.one_of(st.text(max_size=10), junk.filter(
                      lambda v: not isinstance(v, str) and v is not None))),
                  st.tuples(st.just("schedule_id"), st.one_of(st.just(""), junk.filter(
                      lambda v: not isinstance(v, str)))),
                  st.tuples(st.just("meta"), bad_mappings)),
        lambda w, v: w.events.schedule_event(
            "validation.sched", **({"schedule_id": "s", "every": 60} | {v[0]: v[1]})),
        lambda v: v[0]),
    # -- workflows --------------------------------------------------------------------
    "Workflow": Case(
        st.one_of(st.tuples(st.just("name"), bad_names),
                  st.tuples(st.just("attempts"), bad_ints(1).filter(lambda v: v is not None)),
                  st.tuples(st.just("backoff"), st.builds(
                      lambda k: {"type": "fixed", "delay": 1, k: 1},
                      typos(job_options.BACKOFF_KEYS)))),
        lambda w, v: Workflow(**({"name": "validation-x"} | {v[0]: v[1]})),
        lambda v: v[0]),
    "Workflow.step": Case(
        st.one_of(st.tuples(st.just("name"), bad_names),
                  # handler=None declares a step for an emitter-only process (register_emitter)
                  st.tuples(st.just("handler"), not_callable.filter(lambda v: v is not None)),
                  st.tuples(st.just("attempts"), bad_ints(1).filter(lambda v: v is not None))),
        lambda w, v: Workflow("validation-x").step(
            **({"name": "s", "handler": print} | {v[0]: v[1]})),
        lambda v: v[0]),
    "BullMQWorkflowProvider.init": Case(
        st.one_of(st.tuples(st.just("queue_prefix"), bad_names),
                  st.tuples(st.sampled_from(["default_timeout", "step_timeout"]), bad_seconds),
                  st.tuples(st.just("concurrency"), bad_ints(1, 10_000)),
                  st.tuples(st.just("default_step_options"), st.one_of(
                      bad_mappings, st.builds(lambda k: {k: 3}, typos(job_options.KNOWN))))),
        lambda w, v: BullMQWorkflowProvider(w.url, **{v[0]: v[1]}),
        lambda v: option_arg(v, "default_step_options")),
    "execute": Case(
        st.one_of(st.tuples(st.just("meta"), bad_mappings),
                  st.tuples(st.just("timeout"), bad_seconds),
                  st.tuples(st.just("idempotency_key"), st.one_of(
                      junk.filter(lambda v: not isinstance(v, str)), st.just("a:b"))),
                  st.tuples(st.just("data"), not_json)),
        lambda w, v: w.workflows.execute(w.workflow, **({"data": {}} | {v[0]: v[1]})),
        lambda v: v[0]),
    "Queue.misc": Case(
        st.one_of(st.tuples(st.just("job_id"), st.one_of(st.none(), st.just(""), st.floats(),
                                                         st.lists(st.none()))),
                  st.tuples(st.just("states"), st.one_of(st.text(min_size=1, max_size=4),
                                                         st.lists(st.integers(), min_size=1))),
                  st.tuples(st.just("start"), st.one_of(st.floats(), st.text(max_size=2))),
                  st.tuples(st.just("delayed"), bad_bools())),
        lambda w, v: {"job_id": lambda: w.queue.remove(v[1]),
                      "states": lambda: w.queue.remove("x", states=v[1]),
                      "start": lambda: w.queue.get_job_logs("x", start=v[1]),
                      "delayed": lambda: w.queue.drain(delayed=v[1])}[v[0]](),
        lambda v: v[0]),
    "listeners": Case(
        st.one_of(st.tuples(st.just("event"), st.text(max_size=6).filter(
                      lambda e: e not in LISTENER_EVENTS)),
                  st.tuples(st.just("fn"), not_callable)),
        lambda w, v: (worker(w).on(v[1], print) if v[0] == "event"
                      else worker(w).on("completed", v[1])),
        lambda v: v[0]),
    "FlowProducer.get_flow": Case(
        st.one_of(st.tuples(st.just("queue_name"), bad_names),
                  st.tuples(st.just("depth"), bad_ints(1)),
                  st.tuples(st.just("job_id"), st.one_of(st.none(), st.just(""),
                                                         st.floats()))),
        lambda w, v: w.flows.get_flow(**({"job_id": "1", "queue_name": "validation-f"}
                                         | {v[0]: v[1]})),
        lambda v: v[0]),
    "cancel_unschedule": Case(
        st.one_of(st.tuples(st.just("event_name"), bad_names),
                  st.tuples(st.just("key"), st.one_of(st.none(), st.just(""), st.floats())),
                  st.tuples(st.just("schedule_id"), st.one_of(st.none(), st.just(""),
                                                              st.floats()))),
        lambda w, v: (w.events.cancel(v[1], "k") if v[0] == "event_name"
                      else w.events.cancel("validation.c", v[1]) if v[0] == "key"
                      else w.events.unschedule_event("validation.c", v[1])),
        lambda v: v[0]),
    "InProcessEventProvider.init": Case(
        st.one_of(st.tuples(st.just("default_timeout"), bad_seconds),
                  st.tuples(st.just("max_finished_jobs"), bad_ints(0)),
                  st.tuples(st.just("default_job_options"), st.one_of(
                      bad_mappings, st.builds(lambda k: {k: 3}, typos(job_options.KNOWN))))),
        lambda w, v: InProcessEventProvider(**{v[0]: v[1]}),
        lambda v: option_arg(v, "default_job_options")),
    "get_status": Case(
        st.one_of(st.tuples(st.just("flow_id"), st.one_of(st.none(), st.just(""), st.floats(),
                                                          st.lists(st.none()))),
                  st.tuples(st.just("workflow_name"), st.one_of(st.just(""), st.just("a:b"),
                                                                st.integers()))),
        lambda w, v: w.workflows.get_status(**({"flow_id": "f"} | {v[0]: v[1]})),
        lambda v: v[0] if v[0] == "flow_id" else "workflow name"),
    "execute.in_process": Case(
        st.one_of(st.tuples(st.just("meta"), bad_mappings),
                  st.tuples(st.just("timeout"), bad_seconds),
                  st.tuples(st.just("idempotency_key"), st.one_of(
                      junk.filter(lambda v: not isinstance(v, str)), st.just("a:b")))),
        lambda w, v: w.local_workflows.execute(w.workflow, **{v[0]: v[1]}),
        lambda v: v[0]),
}


def _emit(provider: Any, v: Any) -> Any:
    name, value = v
    if name == "event_name":
        return provider.emit(value, {})
    if name == "payload":
        return provider.emit("validation.emit", value)
    return provider.emit("validation.emit", {}, **{name: value})


@pytest.mark.parametrize("case_id", sorted(CASES))
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_invalid_input_is_refused_by_name_and_writes_nothing(world: World, case_id: str,
                                                             data: st.DataObject) -> None:
    case = CASES[case_id]
    value = data.draw(case.strategy, label="bad value")
    assert_refused_by_name(world.r, lambda: case.call(world, value), case.arg(value))


def test_total_examples_reach_the_issue_bound() -> None:
    assert len(CASES) * EXAMPLES >= 1500
