"""Tasks as decorated functions: a job name on a queue, keyword arguments as data."""
from __future__ import annotations

import os
from typing import Iterator

import pytest

import task_defs
from orijs_sync import QueueEvents, Tasks, errors

GUARD = 30.0


@pytest.fixture(scope="module")
def demo(redis_url: str) -> Iterator[Tasks]:
    task_defs.tasks.configure(redis_url)
    yield task_defs.tasks
    task_defs.tasks.close()


@pytest.fixture
def local(redis_url: str) -> Iterator[Tasks]:
    with Tasks(connection=redis_url) as tasks:
        yield tasks


def test_a_task_is_a_job_name_with_keyword_arguments_as_data(local, qname, redis_url):
    @local.task(queue=qname, attempts=3)
    def add(a: int, b: int = 1) -> int:
        return a + b

    assert add(2, 3) == 5                                  # still a function
    job = add.add(a=2)
    assert (job.name, job.data, job.opts["attempts"]) == ("add", {"a": 2}, 3)
    later = add.apply({"a": 1, "b": 2}, delay=60, attempts=1)
    assert local.queue(qname).get_job_state(later.id) == "delayed"
    assert local.queue(qname).get_job(later.id).opts["attempts"] == 1
    with QueueEvents(qname, connection=redis_url) as events, \
            local.worker(qname, concurrency=2):
        assert job.wait_until_finished(events, timeout=GUARD) == 3


def test_arguments_and_options_are_checked_before_anything_is_written(local, qname):
    @local.task(queue=qname)
    def greet(name: str) -> str:
        return name

    for bad in ({}, {"name": "a", "extra": 1}):
        with pytest.raises(errors.InvalidArgument, match="do not fit greet"):
            greet.apply(bad)
    with pytest.raises(errors.InvalidArgument, match="already a task"):
        local.task(queue=qname, name="greet")(lambda: None)
    with pytest.raises(errors.UnknownOption):
        local.task(queue=qname, atempts=3)
    with pytest.raises(errors.InvalidArgument, match="has no task"):
        local.worker("no-tasks-here")
    assert local.queue(qname).count() == 0


def test_a_worker_runs_every_task_of_its_queue_in_child_processes(demo, redis_url):
    with QueueEvents(task_defs.QUEUE, connection=redis_url) as events, \
            demo.worker(task_defs.QUEUE, processes=2):
        welcome = task_defs.send_welcome.add(user_id=7)
        report = task_defs.build_report.delay(month="2026-11")
        assert welcome.wait_until_finished(events, timeout=GUARD) == "hello 7"
        built = report.wait_until_finished(events, timeout=GUARD)
    assert built["month"] == "2026-11" and built["pid"] != os.getpid()
    with pytest.raises(errors.InvalidStateError):
        demo.configure(redis_url)                # after the first add
