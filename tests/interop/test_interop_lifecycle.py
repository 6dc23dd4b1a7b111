"""Interop of the job lifecycle: order of delayed and prioritized jobs, retries split
across Python and Node, pause across sides, every field of a finished job, and a
Node worker rescuing a job whose Python worker was killed with -9."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import List

from orijs_sync import Queue, QueueEvents, Worker

GUARD = 30


def wait_until(predicate, timeout=GUARD, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def add_mixed(add):
    """Adds plain, prioritized and delayed jobs; returns BullMQ's processing order. The
    delay is long (a loaded machine may take seconds to start the other side's worker):
    ``promote_when_done`` ends it once the other four are done, so the delayed job must
    have waited out the whole run, whatever the machine's speed."""
    add("late", {"n": "delayed"}, {"delay": 600_000})
    add("p", {"n": "p5"}, {"priority": 5})
    add("p", {"n": "p1-first"}, {"priority": 1})
    add("p", {"n": "p1-second"}, {"priority": 1})
    add("w", {"n": "plain"}, {})
    return ["plain", "p1-first", "p1-second", "p5", "delayed"]


def promote_when_done(queue: Queue, done: int) -> threading.Thread:
    """A thread that promotes the delayed jobs once ``done`` jobs have completed."""
    def run() -> None:
        wait_until(lambda: queue.get_completed_count() >= done, what=f"{done} completed")
        for job in queue.get_delayed():
            job.promote()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_node_added_mixed_jobs_run_in_bullmq_order_on_python(node, redis_url, namespace):
    name = f"order-{namespace}"
    jobs: List[dict] = []
    expected = add_mixed(lambda n, d, o: jobs.append({"name": n, "data": d, "opts": o}))
    node("addBulk", queue=name, jobs=jobs)
    order: List[str] = []
    with Queue(name, connection=redis_url) as queue:
        promoter = promote_when_done(queue, 4)
        with Worker(name, lambda j: order.append(j.data["n"]), connection=redis_url):
            wait_until(lambda: len(order) == 5)
        promoter.join(GUARD)
    assert order == expected


def test_python_added_mixed_jobs_run_in_bullmq_order_on_node(node, redis_url, namespace):
    name = f"order-{namespace}"
    with Queue(name, connection=redis_url) as queue:
        keys = {"delay": "delay", "priority": "priority"}
        expected = add_mixed(lambda n, d, o: queue.add(
            n, d, **{keys[k]: (v / 1000 if k == "delay" else v) for k, v in o.items()}))
        promoter = promote_when_done(queue, 4)
        out = node("work", queue=name, count=5, concurrency=1, workTimeout=GUARD)
        promoter.join(GUARD)
    assert not out["timedOut"]
    assert [r["returnvalue"]["echo"]["n"] for r in out["results"]] == expected


def test_a_job_retried_by_python_then_node_keeps_one_attempt_count(node, redis_url, namespace):
    name = f"retry-{namespace}"
    failed_once = threading.Event()
    with Queue(name, connection=redis_url) as queue:
        job = queue.add("fail-twice-more", {"message": "node says no"}, attempts=3,
                        backoff={"type": "fixed", "delay": 0.5})
        worker = Worker(name, lambda j: 1 / 0, connection=redis_url)
        worker.on("failed", lambda j, exc: failed_once.set())
        with worker:
            assert failed_once.wait(GUARD)
        assert queue.get_job(job.id).attempts_made == 1
        assert queue.get_job_state(job.id) == "delayed"
        out = node("work", queue=name, count=1, workTimeout=GUARD)
        assert not out["timedOut"]
        assert [r["attemptsMade"] for r in out["results"]] == [2, 3]
        final = queue.get_job(job.id)
    assert final.get_state() == "failed"
    assert (final.attempts_made, final.attempts_started) == (3, 3)
    assert final.failed_reason == "node says no"
    assert len(final.stacktrace) == 3 and "ZeroDivisionError" in final.stacktrace[0]
    seen = node("getJob", queue=name, id=job.id)
    assert (seen["attemptsMade"], seen["attemptsStarted"]) == (3, 3)


def test_paused_from_node_stops_python_and_python_resumes(node, redis_url, namespace):
    name = f"pause-{namespace}"
    done: List[str] = []
    with Queue(name, connection=redis_url) as queue:
        with Worker(name, lambda j: done.append(j.id), connection=redis_url):
            assert node("pause", queue=name)["paused"] is True
            assert queue.is_paused()
            job = queue.add("x", {})
            time.sleep(0.5)
            assert done == [] and queue.get_job_counts("paused")["paused"] == 1
            queue.resume()
            wait_until(lambda: done == [job.id])
        assert node("isPaused", queue=name)["paused"] is False


def test_node_reads_every_field_of_a_python_finished_job(node, redis_url, namespace):
    name = f"fields-{namespace}"

    def handler(job):
        job.update_progress({"step": 2})
        job.log("halfway")
        return {"total": job.data["a"] + job.data["b"]}

    with Queue(name, connection=redis_url) as queue, \
            QueueEvents(name, connection=redis_url) as events:
        job = queue.add("sum", {"a": 2, "b": 3}, job_id="sum-1", attempts=2,
                        backoff={"type": "exponential", "delay": 1.5}, priority=3,
                        remove_on_fail={"count": 5}, keep_logs=10)
        with Worker(name, handler, connection=redis_url, worker_name="py-worker-1"):
            job.wait_until_finished(events, timeout=GUARD)
        mine = queue.get_job(job.id)
    seen = node("getJob", queue=name, id="sum-1")
    assert seen["state"] == "completed"
    assert (seen["id"], seen["name"], seen["data"]) == ("sum-1", "sum", {"a": 2, "b": 3})
    assert seen["opts"] == {"attempts": 2, "backoff": {"type": "exponential", "delay": 1500},
                            "priority": 3, "removeOnFail": {"count": 5}, "jobId": "sum-1",
                            "keepLogs": 10}
    assert seen["returnvalue"] == {"total": 5}
    assert seen["progress"] == {"step": 2}
    assert (seen["attemptsMade"], seen["attemptsStarted"], seen["stalledCounter"]) == (1, 1, 0)
    assert (seen["priority"], seen["delay"]) == (3, 0)
    assert seen["timestamp"] == mine.timestamp
    assert seen["processedOn"] == mine.processed_on and seen["finishedOn"] == mine.finished_on
    assert seen["failedReason"] is None and seen["stacktrace"] == []
    assert seen["processedBy"] == "py-worker-1"


CRASHY = """
import sys, time
from orijs_sync import Worker
def handler(job):
    open(sys.argv[1], "a").write(job.id + "\\n")
    time.sleep(60)
Worker({name!r}, handler, connection={url!r}, lock_duration=1.0, stalled_interval=0.5).run()
"""


def test_node_worker_finishes_a_job_whose_python_worker_was_killed(node, redis_url, namespace,
                                                                    tmp_path):
    name = f"crash-{namespace}"
    log = tmp_path / "started.txt"
    script = tmp_path / "crashy.py"
    script.write_text(CRASHY.format(name=name, url=redis_url))
    with Queue(name, connection=redis_url) as queue:
        job = queue.add("work", {"payload": 42})
        proc = subprocess.Popen([sys.executable, str(script), str(log)])
        try:
            wait_until(lambda: log.exists() and log.read_text().strip() == job.id)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert queue.get_job_state(job.id) == "active"
        out = node("work", queue=name, count=1, workTimeout=GUARD,
                   workerOpts={"stalledInterval": 500, "lockDuration": 1000})
        assert not out["timedOut"]
        assert out["results"][0]["returnvalue"] == {"echo": {"payload": 42}}
        final = queue.get_job(job.id)
    assert final.get_state() == "completed" and final.stalled_counter == 1
    assert final.attempts_started == 2 and final.attempts_made == 1
