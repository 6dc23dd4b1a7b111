"""BullMQEventProvider(default_worker_options={"processes": N}) on real Redis: each
subscriber runs in the workers' child processes with its message and propagation
context rebuilt there, an exception or a child's death fails only its event, and what
a child cannot run (a lambda, a replaced subscriber, a provider with no Redis) is
refused up front, as are bad process options."""
from __future__ import annotations

import os
from typing import Any, Callable, Iterator, List

import proc_handlers_int as handlers
import pytest

from orijs_sync import errors
from orijs_sync.events import BullMQEventProvider, InProcessEventProvider

Make = Callable[..., BullMQEventProvider]


@pytest.fixture
def make(redis_url: str, namespace: str) -> Iterator[Make]:
    made: List[BullMQEventProvider] = []

    def build(start: bool = True, **worker_options: Any) -> BullMQEventProvider:
        provider = BullMQEventProvider(
            redis_url, queue_prefix=f"{namespace}.event", default_job_options={"attempts": 1},
            default_worker_options={"processes": 2, **worker_options})
        made.append(provider)
        return provider.start() if start else provider

    yield build
    for provider in made:
        provider.stop(timeout=10)


def test_subscribers_run_in_child_processes_with_their_context(make):
    provider = make()
    provider.subscribe("calc", handlers.event_pid)
    assert provider.queue_manager._workers["calc"].concurrency == 2     # one per child
    subs = [provider.emit("calc", {"n": n, "sleep": 0.3}, meta={"tenant": "a"})
            for n in range(6)]
    results = [sub.result(timeout=60) for sub in subs]
    assert [r["payload"]["n"] for r in results] == list(range(6))
    assert all(r["meta"] == {"tenant": "a"} for r in results)
    assert [r["caused_by"] for r in results] == [sub.event_id for sub in subs]
    pids = {r["pid"] for r in results}
    assert os.getpid() not in pids and len(pids) >= 2


def test_an_exception_fails_its_event_with_its_message(make):
    provider = make()
    provider.subscribe("bad", handlers.event_raising)
    with pytest.raises(errors.JobFailed, match="^bad event: 5$"):
        provider.emit("bad", {"x": 5}).result(timeout=60)


def test_a_child_that_exits_fails_its_event_and_the_next_one_runs(make):
    provider = make(max_jobs_per_process=10, job_timeout=30)
    provider.subscribe("die", handlers.event_exit_on_request)
    with pytest.raises(errors.JobFailed, match="^Unexpected exit code: 3 signal: null"):
        provider.emit("die", {"exit": True}).result(timeout=60)
    assert provider.emit("die", {}).result(timeout=60) not in (os.getpid(), None)


def test_a_subscriber_is_replaced_before_start_only(make):
    provider = make(start=False)
    provider.subscribe("swap", handlers.event_raising)
    provider.subscribe("swap", handlers.event_pid)          # not started: the last one runs
    provider.start()
    assert provider.emit("swap", {}).result(timeout=60)["pid"] != os.getpid()
    with pytest.raises(errors.InvalidStateError, match="cannot be replaced"):
        provider.subscribe("swap", handlers.event_raising)
    assert provider.emit("swap", {}).result(timeout=60)["pid"] != os.getpid()


def test_what_a_child_cannot_run_is_refused(make, redis_url):
    provider = make()
    with pytest.raises(errors.InvalidArgument, match="handler cannot be sent to a child"):
        provider.subscribe("lambda", lambda message: None)
    assert not provider.queue_manager.has_worker("lambda")
    for options, match in (({"processes": 0}, "processes"),
                           ({"processes": 2, "concurrency": 1}, "at least processes"),
                           ({"job_timeout": 5}, "job_timeout needs processes"),
                           ({"processes": 2, "max_jobs_per_process": 0}, "max_jobs_per_process"),
                           ({"procesess": 2}, "procesess")):
        with pytest.raises(errors.InvalidArgument, match=match):
            BullMQEventProvider(redis_url, default_worker_options=options)
    with pytest.raises(errors.InvalidArgument, match="in-process provider runs its handlers"):
        InProcessEventProvider(default_worker_options={"processes": 2})
