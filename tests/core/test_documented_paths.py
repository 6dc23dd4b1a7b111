"""Documented behaviour that had no test:
keeping outcomes when a finishing write fails, the renewer detecting a lost lock,
retrying through a Redis blip, backoff jitter, stack_trace_limit, Job.refresh, and
obliterate of de:*/repeat:* keys."""
from __future__ import annotations

import os
import signal
import threading
import time
import uuid

import pytest

from orijs_sync import Queue, Worker, errors
from orijs_sync.store import connection
from orijs_sync.engine.processing import compute_backoff
from orijs_sync.testing import RedisServer, wait_until

GUARD = 30.0


def test_obliterate_deletes_deduplication_and_scheduler_keys(queue, r, qname):
    queue.add("x", {}, deduplication={"id": "held"})                  # de:held, no TTL
    queue.add("x", {}, deduplication={"id": "ttl", "ttl": 60})
    queue.upsert_job_scheduler("every-minute", every=60, template={"name": "tick"})
    queue.upsert_job_scheduler("cron", pattern="0 * * * *", template={"name": "hourly"})
    assert r.exists(queue.keys.base + "de:held", queue.keys.base + "repeat:cron") == 2
    queue.obliterate(force=True)
    assert sorted(r.scan_iter(match=f"bull:{qname}:*")) == []


def test_job_refresh_reads_what_the_worker_wrote(queue, redis_url, qname):
    job = queue.add("x", {"n": 1})

    def handler(j):
        j.update_progress(70)
        j.update_data({"n": 2})
        return "done"

    with Worker(qname, handler, connection=redis_url):
        wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD)
    assert job.progress in (0, None) and job.returnvalue is None      # the stale copy
    assert job.refresh() is job
    assert (job.progress, job.data, job.returnvalue) == (70, {"n": 2}, "done")
    assert job.finished_on is not None
    queue.remove(job.id)
    with pytest.raises(errors.JobNotFound):
        job.refresh()


def test_stack_trace_limit_keeps_the_last_traces(queue, redis_url, qname):
    def fail(j):
        raise RuntimeError(f"attempt {j.attempts_made}")

    kept = queue.add("x", {}, attempts=4, stack_trace_limit=2)
    none = queue.add("x", {}, attempts=2, stack_trace_limit=0)
    with Worker(qname, fail, connection=redis_url):
        wait_until(lambda: {queue.get_job_state(kept.id), queue.get_job_state(none.id)}
                   == {"failed"}, GUARD)
    stack = queue.get_job(kept.id).stacktrace
    assert len(stack) == 2 and "attempt 2" in stack[0] and "attempt 3" in stack[1]
    assert queue.get_job(none.id).stacktrace == []


def test_backoff_jitter_spreads_delays_below_the_computed_one(queue, redis_url, qname):
    job = queue.add("x", {}, attempts=2, backoff={"type": "fixed", "delay": 1.0, "jitter": 0.5})
    delays = {compute_backoff(job.opts["backoff"], 1, RuntimeError(), job, {})
              for _ in range(200)}
    assert all(500 <= d <= 1000 for d in delays) and len(delays) > 10
    exp = {"type": "exponential", "delay": 100, "jitter": 1}
    assert all(0 <= compute_backoff(exp, 3, RuntimeError(), job, {}) <= 400 for _ in range(50))
    # In a worker: the retry is delayed by a jittered amount within those bounds.
    failed_at = []

    def fail_once(j):
        if j.attempts_made == 0:
            failed_at.append(time.time() * 1000)
            raise RuntimeError("again")
        return "ok"

    with Worker(qname, fail_once, connection=redis_url):
        wait_until(lambda: queue.get_job_state(job.id) == "delayed", GUARD)
        score = queue.client.zscore(queue.keys.delayed, job.id)
        due = int(score) >> 12
        assert failed_at[0] - 50 <= due - 500 and due - 1000 <= failed_at[0] + 1000
        wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD)


def test_the_lock_renewer_detects_a_lost_lock(queue, redis_url, qname, r):
    running, release = threading.Event(), threading.Event()
    seen = []

    def handler(j):
        running.set()
        release.wait(GUARD)
        return "too late"

    job = queue.add("x", {})
    worker = Worker(qname, handler, connection=redis_url, lock_duration=1,
                    skip_stalled_check=True)
    worker.on("error", seen.append)
    with worker:
        assert running.wait(GUARD)
        r.set(f"{queue.keys.job(job.id)}:lock", "another-worker", px=60_000)   # taken over
        wait_until(lambda: any(isinstance(e, errors.LockLost) and job.id in str(e)
                               for e in seen), GUARD, what="the renewer reports the lost lock")
        release.set()
        wait_until(lambda: len([e for e in seen if isinstance(e, errors.LockLost)]) >= 2, GUARD,
                   what="the finishing write refused too")
    assert queue.get_job_state(job.id) == "active"        # left to its new owner
    assert queue.get_job(job.id).returnvalue is None


def test_an_outcome_whose_finishing_write_fails_is_kept_and_written_later(
        queue, redis_url, qname, r):
    """The write is refused (an ACL change: NOPERM, not a connection error, so nothing
    retries it inline); the finisher keeps the outcome and writes it once allowed."""
    user, password = f"w-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    r.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "&*", "+@all")
    running, release = threading.Event(), threading.Event()
    seen = []

    def handler(j):
        running.set()
        release.wait(GUARD)
        return {"kept": True}

    try:
        url = redis_url.replace("redis://", f"redis://{user}:{password}@")
        job = queue.add("x", {})
        worker = Worker(qname, handler, connection=url, skip_stalled_check=True)
        worker.on("error", seen.append)
        worker.start()
        try:
            assert running.wait(GUARD)
            r.execute_command("ACL", "SETUSER", user, "-evalsha", "-eval")
            release.set()
            wait_until(lambda: seen, GUARD, what="the refused write reported")
            assert queue.get_job_state(job.id) == "active"
            r.execute_command("ACL", "SETUSER", user, "+evalsha", "+eval")
            wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD)
        finally:
            release.set()
            worker.close(timeout=10)
        assert queue.get_job(job.id).returnvalue == {"kept": True}
        assert all(isinstance(e, errors.OrijsError) for e in seen)
    finally:
        r.execute_command("ACL", "DELUSER", user)


def test_a_finishing_write_is_retried_through_a_redis_blip(monkeypatch, qname):
    """Redis frozen (SIGSTOP) while the job finishes: the write times out, is retried,
    and lands once Redis answers again; the result is written once."""
    monkeypatch.setattr(connection, "DEFAULT_SOCKET_TIMEOUT", 0.5)
    server = RedisServer().start()
    pid = server._proc.pid
    running, release = threading.Event(), threading.Event()
    completed = []

    def handler(j):
        running.set()
        release.wait(GUARD)
        return j.data["n"] * 2

    try:
        with Queue(qname, connection=server.url) as queue:
            job = queue.add("x", {"n": 21})
            worker = Worker(qname, handler, connection=server.url, lock_duration=20,
                            skip_stalled_check=True)
            worker.on("completed", lambda j, result: completed.append(result))
            worker.start()
            try:
                assert running.wait(GUARD)
                os.kill(pid, signal.SIGSTOP)
                try:
                    release.set()
                    time.sleep(2)          # several timed-out tries of the finishing write
                finally:
                    os.kill(pid, signal.SIGCONT)
                wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD)
            finally:
                release.set()
                worker.close(timeout=10)
            assert queue.get_job(job.id).returnvalue == 42 and completed == [42]
    finally:
        os.kill(pid, signal.SIGCONT)
        server.stop()


def test_a_worker_carries_on_after_redis_is_killed_and_restarted(qname):
    """RedisServer.kill(): the worker's roles survive the outage and reconnect to the
    server started again on the same port."""
    server = RedisServer().start()
    port = server.port
    replacement = None
    done = []
    try:
        worker = Worker(qname, lambda j: done.append(j.data["n"]), connection=server.url,
                        drain_delay=0.5, skip_stalled_check=True)
        with worker, Queue(qname, connection=server.url) as queue:
            queue.add("x", {"n": 1})
            wait_until(lambda: done == [1], GUARD)
            server.kill()
            time.sleep(1)                     # the fetcher meets the outage
            replacement = RedisServer(port=port)
            replacement.start(attempts=1)
            wait_until(lambda: _answers(queue), GUARD, what="the restarted server answers")
            queue.add("x", {"n": 2})
            wait_until(lambda: done == [1, 2], GUARD, what="a job after the restart runs")
    finally:
        server.stop()
        if replacement is not None:
            replacement.stop()


def _answers(queue: Queue) -> bool:
    try:
        queue.client.ping()
        return True
    except errors.ConnectionError:
        return False
