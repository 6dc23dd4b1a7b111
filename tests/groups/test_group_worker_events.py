"""GroupWorker's events and shutdown as GroupMQ documents them, on real Redis: ``ready``,
``graceful-timeout`` from ``close(timeout)``, ``off``/``remove_all_listeners``, and the
worker's status calls. Waits are generous guards; nothing asserts on timing."""
from __future__ import annotations

import inspect
import threading
from typing import Any, List

import pytest

from orijs_sync.base.util import now_ms
from orijs_sync.groups import GroupQueue, GroupWorker
from orijs_sync.groups._options import GroupOptionError
from orijs_sync.testing import orijs_threads, wait_until


def test_ready_then_closed(gq: GroupQueue) -> None:
    seen: List[str] = []
    w = GroupWorker(gq, lambda job: None)
    w.on("ready", lambda: seen.append("ready")).on("closed", lambda: seen.append("closed"))
    w.start()
    assert seen == ["ready"]
    assert w.close() is True
    assert seen == ["ready", "closed"]


def test_close_timeout_emits_graceful_timeout(gq: GroupQueue) -> None:
    release = threading.Event()
    seen: List[Any] = []
    gq.add(group_id="g", data={"n": 1}, job_id="slow")
    w = GroupWorker(gq, lambda job: release.wait(60), concurrency=2)
    w.on("graceful-timeout", lambda job: seen.append(("timeout", job.id, job.group_id)))
    w.on("closed", lambda: seen.append(("closed",)))
    w.start()
    wait_until(lambda: w.is_processing() and w.get_current_job() is not None, 30)
    try:
        assert w.close(timeout=0.3) is False
        assert seen == [("timeout", "slow", "g"), ("closed",)]
    finally:
        release.set()


def test_close_defaults_to_groupmqs_30_seconds(gq: GroupQueue) -> None:
    assert inspect.signature(GroupWorker.close).parameters["timeout"].default == 30
    with pytest.raises(GroupOptionError):
        GroupWorker(gq, print).close(timeout=-0.5)


def test_off_and_remove_all_listeners(gq: GroupQueue) -> None:
    seen: List[str] = []
    w = GroupWorker(gq, lambda job: None)

    def on_done(job: Any, result: Any) -> None:
        seen.append(job.id)
    w.on("completed", on_done).on("completed", lambda job, result: seen.append("other"))
    w.on("ready", lambda: seen.append("ready"))
    w.off("completed", on_done)
    w.remove_all_listeners("ready")
    with pytest.raises(GroupOptionError):
        w.off("nope", on_done)
    with pytest.raises(GroupOptionError):
        w.on("completed", "not callable")   # type: ignore[arg-type]
    gq.add(group_id="g", data={}, job_id="j1")
    with w:
        wait_until(lambda: seen == ["other"], 30)
        w.remove_all_listeners()
        gq.add(group_id="g", data={}, job_id="j2")
        assert gq.wait_for_empty(30)
    assert seen == ["other"]


def test_worker_metrics(gq: GroupQueue) -> None:
    release = threading.Event()
    w = GroupWorker(gq, lambda job: release.wait(30))
    metrics = w.get_worker_metrics()
    assert metrics["total_jobs_processed"] == 0 and metrics["last_job_pickup_time"] is None
    assert w.is_processing() is False and w.get_current_job() is None
    gq.add(group_id="g", data={}, job_id="m1")
    with w:
        wait_until(lambda: w.get_current_job() is not None, 30)
        metrics = w.get_worker_metrics()
        assert metrics["is_processing"] and metrics["jobs_in_progress_count"] == 1
        assert metrics["jobs_in_progress"][0]["job_id"] == "m1"
        assert metrics["jobs_in_progress"][0]["group_id"] == "g"
        assert metrics["last_job_pickup_time"] is not None
        release.set()
        wait_until(lambda: w.get_worker_metrics()["total_jobs_processed"] == 1, 30)
        assert w.is_processing() is False


@pytest.mark.parametrize("event", ["completed", "failed", "stalled"])
def test_close_from_a_listener_on_the_workers_own_thread(gq: GroupQueue, event: str) -> None:
    """``completed`` runs on the finisher's thread, ``failed`` on a handler's, ``stalled``
    on the stalled checker's: close() there returns (it never joins the thread calling
    it), every other thread is stopped and joined, and the calling one ends once the
    listener returns."""
    gq.add(group_id="g", data={"n": 0}, job_id="j")
    if event == "stalled":       # held by a dead worker, its deadline 1 ms away
        gq.run_script("reserve", now_ms(), 1, 1, "", "dead", 100)

    def handler(job: Any) -> None:
        if event == "failed":
            raise RuntimeError("this attempt fails")
    w = GroupWorker(gq, handler, stalled_interval=0.1, backoff=0)
    first = threading.Event()
    outcome: List[Any] = []

    def close_here(*args: Any) -> None:
        if first.is_set():         # the first call only (a retry may fail meanwhile)
            return
        first.set()
        try:
            outcome.append(w.close(timeout=5))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            outcome.append(exc)
    w.on(event, close_here)
    w.start()
    try:
        wait_until(lambda: bool(outcome), 30, f"close() from a {event} listener")
        assert outcome == [True]
        wait_until(lambda: not [t for t in orijs_threads() if gq.name in t.name], 30,
                   "every thread of the worker ended")
    finally:
        w.close()


def test_close_from_inside_the_handler_still_writes_its_job(gq: GroupQueue) -> None:
    """close() called by the handler itself returns; the calling job's outcome is still
    written once the handler returns, and every thread of the worker ends."""
    gq.add(group_id="g", data={"n": 0}, job_id="j")
    outcome: List[Any] = []
    completed: List[str] = []

    def handler(job: Any) -> str:
        try:
            outcome.append(w.close(timeout=5))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            outcome.append(exc)
        return "done"
    w = GroupWorker(gq, handler)
    w.on("completed", lambda job, result: completed.append(job.id))
    w.start()
    try:
        wait_until(lambda: bool(outcome), 30, "close() from the handler")
        assert outcome == [True]
        wait_until(lambda: completed == ["j"], 30, "the calling job's completion")
        wait_until(lambda: not [t for t in orijs_threads() if gq.name in t.name], 30,
                   "every thread of the worker ended")
        assert gq.is_empty()
    finally:
        w.close()
