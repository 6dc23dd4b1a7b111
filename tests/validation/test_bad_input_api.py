"""Property suite for BullMQ 5's and GroupMQ 1.1's calls added after the first one
(test_bad_input_properties.py): bulk actions, removal with children, flow
``queues_options``, global limits, manual processing and cancellation, worker options,
events trimming and length, ``size_limit``, ``change_priority(lifo=)``, deduplication
modes and keys, getters with arguments, legacy repeatable jobs, and the group queue's
listing, processing by hand and ``auto_batch``.

Each bad value raises an ``errors.ValidationError`` (also a ``TypeError`` or
``ValueError``) naming the argument, and leaves the Redis keyspace as it was.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterator, NamedTuple

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

from orijs_sync import FlowProducer, Queue, Worker
from orijs_sync import options as job_options
from orijs_sync.groups import GroupJob, GroupQueue, GroupWorker

EXAMPLES = 30

not_str = junk.filter(lambda v: not isinstance(v, str))
bad_ids = st.one_of(st.none(), st.just(""), st.floats(), st.lists(st.none(), max_size=2))
bad_tokens = st.one_of(st.none(), st.just(""), not_str)
# durations that must also be at least 1 ms
bad_positive_seconds = st.one_of(bad_seconds, st.just(0), st.just(0.0), st.just(0.0004))


def not_none(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy.filter(lambda v: v is not None)


class World(NamedTuple):
    url: str
    r: redis.Redis
    queue: Queue
    job: Any               # a delayed job read by the queue
    manual: Worker         # Worker(name, None): manual processing
    flows: FlowProducer
    gq: GroupQueue
    held: GroupJob         # a group job reserved by hand


@pytest.fixture(scope="module")
def world(redis_url: str) -> Iterator[World]:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    queue = Queue("validation-api", connection=redis_url)
    job = queue.add("seed", {"n": 1}, delay=3600)
    manual = Worker(queue.name, None, connection=redis_url)
    gq = GroupQueue("validation-api-g", connection=redis_url, job_timeout=3600)
    gq.add(group_id="g", data={}, job_id="g0")
    held = gq.reserve()
    assert held is not None
    try:
        yield World(redis_url, r, queue, job, manual, FlowProducer(redis_url), gq, held)
    finally:
        manual.close()
        queue.obliterate(force=True)
        queue.close()
        for key in r.keys("groupmq:validation-api-g:*"):
            r.delete(key)
        gq.close()
        r.close()


def named(v: Any) -> str:
    return str(v[0])


def pick(calls: Dict[str, Callable[[World, Any], Any]]) -> Callable[[World, Any], Any]:
    """A case of several (argument, bad value) pairs: the call for the argument."""
    return lambda w, v: calls[v[0]](w, v[1])


def worker(w: World, **kw: Any) -> Worker:
    return Worker("validation-api-w", lambda job: None, connection=w.url, **kw)


def dedup(key: str) -> st.SearchStrategy[Any]:
    """(option name, bad deduplication dict, the name the message must carry)."""
    base = {"id": "d", "ttl": 5}
    return st.one_of(
        st.tuples(st.just(key), st.builds(lambda f, b: {**base, f: b},
                                          st.sampled_from(["extend", "replace",
                                                           "keep_last_if_active"]),
                                          bad_bools()),
                  st.just("")),
        st.tuples(st.just(key), st.builds(lambda t: {"id": "d", "ttl": t}, bad_seconds),
                  st.just(f"{key}.ttl")),
        st.tuples(st.just(key), st.builds(lambda i: {"id": i}, bad_tokens),
                  st.just(f"{key}.id")),
        st.tuples(st.just(key), st.builds(lambda k: {**base, k: True},
                                          typos(job_options.DEDUPLICATION_KEYS)),
                  st.just("")),
        st.tuples(st.just(key), bad_mappings, st.just(key)),
        # a mode that cannot hold: extend without a ttl, keep_last_if_active with one
        st.tuples(st.just(key), st.just({"id": "d", "extend": True}), st.just(f"{key}.extend")),
        st.tuples(st.just(key), st.just({"id": "d", "ttl": 5, "keep_last_if_active": True}),
                  st.just(f"{key}.ttl")),
    )


def dedup_arg(v: Any) -> str:
    """A bad flag is named ``deduplication.flag``, a typo by itself."""
    key, value, arg = v
    if arg:
        return str(arg)
    odd = next(k for k in value if k not in ("id", "ttl"))
    return f"{key}.{odd}" if odd in job_options.DEDUPLICATION_KEYS else odd


CASES: Dict[str, Case] = {
    # -- bulk actions and removal ----------------------------------------------------
    "Queue.retry_jobs": Case(
        st.one_of(st.tuples(st.just("state"), st.one_of(
                      st.text(max_size=6).filter(lambda s: s not in ("failed", "completed")),
                      not_str)),
                  st.tuples(st.just("count"), bad_ints(1)),
                  st.tuples(st.just("timestamp"), st.one_of(
                      st.floats(max_value=-1e-9), st.just(math.nan), st.just(math.inf),
                      st.text(max_size=2), st.booleans(), st.integers(min_value=2 ** 53)))),
        lambda w, v: w.queue.retry_jobs(**{v[0]: v[1]}), named),
    "Queue.promote_jobs": Case(bad_ints(1), lambda w, v: w.queue.promote_jobs(v),
                               const("count")),
    "remove.remove_children": Case(
        st.one_of(st.tuples(st.just("queue"), bad_bools()), st.tuples(st.just("job"),
                                                                       bad_bools())),
        lambda w, v: (w.queue.remove(w.job.id, remove_children=v[1]) if v[0] == "queue"
                      else w.job.remove(remove_children=v[1])),
        const("remove_children")),
    "FlowProducer.queues_options": Case(
        st.one_of(st.tuples(bad_mappings, st.just("queues_options")),
                  st.tuples(st.builds(lambda o: {"validation-api-f": o}, bad_mappings),
                            st.just("queues_options")),
                  st.tuples(st.builds(lambda n: {n: {}}, st.one_of(
                      st.just(""), st.just("a:b"), st.text(" ", min_size=1, max_size=2))),
                      st.just("queues_options")),
                  st.tuples(st.builds(lambda k: {"validation-api-f": {"default_job_options":
                                                                      {k: 1}}},
                                      typos(job_options.KNOWN)), st.just("queues_options")),
                  st.tuples(st.builds(lambda k: {"validation-api-f": {k: 1}},
                                      typos({"default_job_options"})),
                            st.just("queues_options")),
                  st.tuples(st.builds(lambda n: {"validation-api-f": {"default_job_options":
                                                                      {"attempts": n}}},
                                      not_none(bad_ints(1))), st.just("attempts")),
                  st.tuples(st.builds(lambda k: {"validation-api-f": {k: {}}},
                                      st.sampled_from(["streams", "connection", "prefix"])),
                            st.just("queues_options")),
                  st.tuples(st.builds(lambda k: {"validation-api-f": {"default_job_options":
                                                                      {k: "x"}}},
                                      st.sampled_from(["job_id", "parent", "deduplication"])),
                            st.just("default_job_options"))),
        lambda w, v: w.flows.add({"name": "p", "queue_name": "validation-api-f"},
                                 queues_options=v[0]),
        lambda v: v[1]),
    # -- global limits and the limiter key ---------------------------------------------
    "Queue.global_limits": Case(
        st.one_of(st.tuples(st.just("concurrency"), bad_ints(1)),
                  st.tuples(st.just("max"), bad_ints(1)),
                  st.tuples(st.just("duration"), bad_positive_seconds),
                  st.tuples(st.just("seconds"), bad_positive_seconds),
                  st.tuples(st.just("max_jobs"), not_none(bad_ints(1)))),
        pick({"concurrency": lambda w, x: w.queue.set_global_concurrency(x),
              "max": lambda w, x: w.queue.set_global_rate_limit(x, 1),
              "duration": lambda w, x: w.queue.set_global_rate_limit(1, x),
              "seconds": lambda w, x: w.queue.rate_limit(x),
              "max_jobs": lambda w, x: w.queue.get_rate_limit_ttl(x)}),
        named),
    "Worker.rate_limit": Case(not_none(bad_seconds),
                              lambda w, v: w.manual.rate_limit(v), const("seconds")),
    # -- manual processing and cancellation --------------------------------------------
    "Worker.get_next_job": Case(
        st.one_of(st.tuples(st.just("token"), bad_tokens),
                  st.tuples(st.just("block"), bad_bools()),
                  st.tuples(st.just("timeout"), not_none(bad_seconds))),
        lambda w, v: w.manual.get_next_job(**({"token": "t"} | {v[0]: v[1]})), named),
    "Job.manual_moves": Case(
        st.one_of(st.tuples(st.sampled_from(["completed", "failed", "wait", "lock",
                                             "delayed"]), st.one_of(st.just(""), not_str)),
                  st.tuples(st.just("fetch_next"), bad_bools()),
                  st.tuples(st.just("error"), st.one_of(st.none(), st.text(max_size=3),
                                                        st.integers())),
                  st.tuples(st.just("duration"), bad_positive_seconds),
                  st.tuples(st.just("timestamp"), st.one_of(
                      st.floats(max_value=-1e-9), st.just(math.nan), st.text(max_size=2),
                      st.booleans(), st.none(), st.just(1e300)))),
        pick({"completed": lambda w, x: w.job.move_to_completed(1, x),
              "failed": lambda w, x: w.job.move_to_failed(ValueError("x"), x),
              "wait": lambda w, x: w.job.move_to_wait(x),
              "lock": lambda w, x: w.job.extend_lock(x, 30),
              "delayed": lambda w, x: w.job.move_to_delayed(1e9, x),
              "fetch_next": lambda w, x: w.job.move_to_completed(1, "t", fetch_next=x),
              "error": lambda w, x: w.job.move_to_failed(x, "t"),
              "duration": lambda w, x: w.job.extend_lock("t", x),
              "timestamp": lambda w, x: w.job.move_to_delayed(x, "t")}),
        lambda v: v[0] if v[0] in ("fetch_next", "error", "duration", "timestamp")
        else "token"),
    "Worker.manual": Case(bad_names, lambda w, v: Worker(v, None, connection=w.url),
                          const("name")),
    "Worker.cancel": Case(
        st.one_of(st.tuples(st.just("job_id"), bad_ids),
                  st.tuples(st.just("reason"), not_str.filter(lambda v: v is not None)),
                  st.tuples(st.just("all"), not_str.filter(lambda v: v is not None))),
        pick({"job_id": lambda w, x: w.manual.cancel_job(x),
              "reason": lambda w, x: w.manual.cancel_job("1", x),
              "all": lambda w, x: w.manual.cancel_all_jobs(x)}),
        lambda v: "job_id" if v[0] == "job_id" else "reason"),
    # -- worker options ----------------------------------------------------------------
    "Worker.lock_and_start": Case(
        st.one_of(st.tuples(st.just("max_started_attempts"), not_none(bad_ints(0))),
                  st.tuples(st.just("skip_lock_renewal"), bad_bools()),
                  st.tuples(st.just("lock_renew_time"), st.one_of(
                      not_none(bad_positive_seconds), st.just(31))),   # past lock_duration
                  st.tuples(st.just("maximum_rate_limit_delay"), bad_positive_seconds)),
        lambda w, v: worker(w, **{v[0]: v[1]}), named),
    # -- events, sizes, priorities -----------------------------------------------------
    "Queue.trim_events": Case(bad_ints(0), lambda w, v: w.queue.trim_events(v),
                              const("max_len")),
    "Queue.events_max_len": Case(
        not_none(bad_ints(0)),
        lambda w, v: Queue("validation-api-x", connection=w.url, events_max_len=v),
        const("events_max_len")),
    "Queue.add.size_limit": Case(
        st.one_of(not_none(bad_ints(1)), st.just(1)),        # 1 byte: the data is larger
        lambda w, v: w.queue.add("x", {"n": 1}, size_limit=v), const("size_limit")),
    "Job.change_priority.lifo": Case(bad_bools(),
                                     lambda w, v: w.job.change_priority(1, lifo=v),
                                     const("lifo")),
    # -- deduplication -----------------------------------------------------------------
    "Queue.add.deduplication": Case(
        st.one_of(dedup("deduplication"), dedup("debounce")),
        lambda w, v: w.queue.add("x", {}, **{v[0]: v[1]}), dedup_arg),
    "bulk.deduplication": Case(
        dedup("deduplication"),
        lambda w, v: w.queue.add_bulk([{"name": "ok", "data": {}},
                                       {"name": "x", "opts": {v[0]: v[1]}}]),
        dedup_arg),
    "FlowProducer.deduplication": Case(
        dedup("deduplication"),
        lambda w, v: w.flows.add({"name": "p", "queue_name": "validation-api-f",
                                  "opts": {v[0]: v[1]},
                                  "children": [{"name": "c", "queue_name": "validation-api-f"}]}),
        dedup_arg),
    "Queue.add.deduplication_and_debounce": Case(
        st.just({"id": "d"}),
        lambda w, v: w.queue.add("x", {}, deduplication=v, debounce=v), const("debounce")),
    "Queue.deduplication_keys": Case(
        st.tuples(st.sampled_from(["remove", "get"]), bad_tokens),
        lambda w, v: (w.queue.remove_deduplication_key(v[1]) if v[0] == "remove"
                      else w.queue.get_deduplication_job_id(v[1])),
        const("deduplication_id")),
    # -- getters, logs and progress by id, legacy repeatable jobs ----------------------
    "Queue.getters_more": Case(
        st.one_of(st.tuples(st.just("priorities"), st.one_of(
                      st.lists(st.one_of(st.integers(max_value=-1), st.text(max_size=2),
                                         st.floats()), min_size=1, max_size=3),
                      st.integers(), st.none())),
                  st.tuples(st.just("types"), st.one_of(
                      st.text(min_size=1, max_size=5).filter(lambda s: s.isalpha()),
                      st.lists(st.integers(), min_size=1, max_size=2))),
                  st.tuples(st.just("start"), st.one_of(st.floats(), st.text(max_size=2),
                                                        st.none(), st.booleans()))),
        pick({"priorities": lambda w, x: w.queue.get_counts_per_priority(x),
              "types": lambda w, x: w.queue.get_ranges(x),
              "start": lambda w, x: w.queue.get_waiting_children(start=x)}),
        named),
    "Queue.job_writes_by_id": Case(
        st.one_of(st.tuples(st.just("job_id"), bad_ids),
                  st.tuples(st.just("line"), not_str),
                  st.tuples(st.just("keep_logs"), not_none(bad_ints(0))),
                  st.tuples(st.just("progress"), not_json),
                  st.tuples(st.just("clear_logs"), not_none(bad_ints(0)))),
        pick({"job_id": lambda w, x: w.queue.add_job_log(x, "line"),
              "line": lambda w, x: w.queue.add_job_log(w.job.id, x),
              "keep_logs": lambda w, x: w.queue.add_job_log(w.job.id, "line", x),
              "progress": lambda w, x: w.queue.update_job_progress(w.job.id, x),
              "clear_logs": lambda w, x: w.job.clear_logs(x)}),
        lambda v: "keep_logs" if v[0] == "clear_logs" else v[0]),
    "Queue.repeatable": Case(
        st.one_of(st.tuples(st.just("name"), not_str),
                  st.tuples(st.just("repeat_opts"), bad_mappings),
                  st.tuples(st.just("key"), bad_tokens),
                  st.tuples(st.just("start"), st.one_of(st.floats(), st.text(max_size=2)))),
        pick({"name": lambda w, x: w.queue.remove_repeatable(x, {"every": 1000}),
              "repeat_opts": lambda w, x: w.queue.remove_repeatable("n", x),
              "key": lambda w, x: w.queue.remove_repeatable_by_key(x),
              "start": lambda w, x: w.queue.get_repeatable_jobs(start=x)}),
        named),
    # -- GroupMQ -------------------------------------------------------------------------
    "GroupQueue.get_jobs_by_status": Case(
        st.one_of(st.tuples(st.just("statuses"), st.one_of(
                      st.lists(st.text(max_size=5), min_size=1, max_size=2),
                      st.integers(), st.none())),
                  st.tuples(st.just("start"), st.one_of(st.integers(max_value=-1),
                                                        st.floats(), st.text(max_size=2))),
                  st.tuples(st.just("end"), st.one_of(st.integers(max_value=-2),
                                                      st.floats(), st.text(max_size=2))),
                  st.tuples(st.just("end"), st.integers(0, 5)).map(   # end before start
                      lambda v: ("end", {"start": v[1] + 1, "end": v[1]}))),
        lambda w, v: w.gq.get_jobs_by_status(**({"statuses": ["waiting"]} | (
            v[1] if isinstance(v[1], dict) else {v[0]: v[1]}))),
        named),
    "GroupQueue.by_hand": Case(
        st.one_of(st.tuples(st.sampled_from(["complete", "heartbeat", "fail", "dead_letter"]),
                            st.one_of(junk, st.none(), st.just("g0"),
                                      st.just(GroupJob(id="g0", group_id="g", data=None)))),
                  st.tuples(st.just("max_batch"), bad_ints(1)),
                  st.tuples(st.just("result"), not_json),
                  st.tuples(st.just("extend"), st.one_of(st.just(0), bad_seconds.filter(
                      lambda v: v is not None))),
                  st.tuples(st.sampled_from(["error", "dead_error"]), st.one_of(
                      st.integers(), st.lists(st.none(), max_size=1), st.builds(object))),
                  st.tuples(st.just("backoff"), not_none(bad_seconds))),
        pick({"complete": lambda w, x: w.gq.complete(x),
              "heartbeat": lambda w, x: w.gq.heartbeat(x),
              "fail": lambda w, x: w.gq.fail(x),
              "dead_letter": lambda w, x: w.gq.dead_letter(x),
              "max_batch": lambda w, x: w.gq.reserve_batch(x),
              "result": lambda w, x: w.gq.complete(w.held, x),
              "extend": lambda w, x: w.gq.heartbeat(w.held, x),
              "error": lambda w, x: w.gq.fail(w.held, x),
              "dead_error": lambda w, x: w.gq.dead_letter(w.held, x),
              "backoff": lambda w, x: w.gq.fail(w.held, "e", backoff=x)}),
        lambda v: {"complete": "job", "heartbeat": "job", "fail": "job", "dead_letter": "job",
                   "dead_error": "error"}.get(v[0], v[0])),
    "GroupQueue.auto_batch": Case(
        st.one_of(st.tuples(st.one_of(st.integers(), st.text(min_size=1, max_size=3),
                                      st.lists(st.none(), min_size=1, max_size=1)),
                            st.just("auto_batch")),
                  st.tuples(st.builds(lambda k: {k: 1}, typos({"size", "max_wait"})),
                            st.just("auto_batch")),
                  st.tuples(st.builds(lambda n: {"size": n}, not_none(bad_ints(1))),
                            st.just("auto_batch size")),
                  st.tuples(st.builds(lambda s: {"max_wait": s}, not_none(bad_seconds)),
                            st.just("auto_batch max_wait"))),
        lambda w, v: GroupQueue("validation-api-g2", connection=w.url, auto_batch=v[0]),
        lambda v: v[1]),
    "GroupWorker.options": Case(
        st.one_of(st.tuples(st.just("on_error"), not_callable.filter(lambda v: v is not None)),
                  st.tuples(st.sampled_from(["heartbeat", "stalled_grace_period",
                                             "cleanup_interval"]),
                            not_none(bad_seconds)),
                  st.tuples(st.just("max_attempts"), not_none(bad_ints(1))),
                  st.tuples(st.just("enable_cleanup"), bad_bools()),
                  st.tuples(st.just("name"), st.one_of(not_str.filter(lambda v: v is not None),
                                                       st.just("")))),
        lambda w, v: GroupWorker(w.gq, lambda job: None, **{v[0]: v[1]}), named),
    "GroupQueue.name": Case(
        bad_names.filter(lambda v: not isinstance(v, str) or ":" not in v),
        lambda w, v: GroupQueue(v, connection=w.url), const("name")),
}


@pytest.mark.parametrize("case_id", sorted(CASES))
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_new_calls_refuse_bad_input_by_name_and_write_nothing(world: World, case_id: str,
                                                              data: st.DataObject) -> None:
    case = CASES[case_id]
    value = data.draw(case.strategy, label="bad value")
    assert_refused_by_name(world.r, lambda: case.call(world, value), case.arg(value))
