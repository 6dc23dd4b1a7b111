"""Redis outages shorter than half the lock (Redis stopped, then restarted with its AOF):
no job runs in two workers at once, no finished result is dropped, work resumes at once,
and workers started before Redis wait for it."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Iterator, List

import pytest
import redis

from orijs_sync import Queue, QueueEvents, Worker, errors
from orijs_sync.events import CompletionTracker
from orijs_sync.testing import RedisServer, wait_until


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    """A Redis of this test alone, with an AOF, that the test may stop and restart."""
    with RedisServer(appendonly=True) as server:
        yield server


def lock_renewals(r: redis.Redis, lock_key: str, count: int) -> List[float]:
    """The times (monotonic) of the next ``count`` renewals of a lock: its PTTL going up."""
    times: List[float] = []
    last = r.pttl(lock_key)
    deadline = time.monotonic() + 60
    while len(times) < count:
        assert time.monotonic() < deadline, "the lock was not renewed"
        ttl = r.pttl(lock_key)
        if ttl > last + 50:
            times.append(time.monotonic())
        last = ttl
        time.sleep(0.005)
    return times


def outage(server: RedisServer, r: redis.Redis, lock_key: str, timing: str,
           seconds: float, when_down: Callable[[], None] = lambda: None) -> None:
    """Stop Redis for ``seconds``, right after a renewal of the lock, or just before the
    next one is due (the outage then swallows it: the worst case for the lock)."""
    first, second = lock_renewals(r, lock_key, 2)
    if timing == "just before the next renewal":
        time.sleep(max(second + (second - first) - 0.2 - time.monotonic(), 0))
    server.halt()
    when_down()
    time.sleep(seconds)
    server.restart()


def assert_recorded_once(queue: Queue, r: redis.Redis, job_id: str, value: object,
                         reported: List[BaseException]) -> None:
    """The job's result is the one expected, written once, and no lock was lost."""
    assert queue.get_job(job_id).returnvalue == value
    assert sum(1 for _, f in r.xrange(queue.keys.events)
               if f.get("event") == "completed" and f.get("jobId") == job_id) == 1
    assert not [e for e in reported if isinstance(e, errors.LockLost)]


@pytest.mark.parametrize("timing", ["right after a renewal", "just before the next renewal"])
def test_an_outage_shorter_than_half_the_lock_never_runs_a_job_twice(aof_redis, timing):
    url = aof_redis.url
    r = redis.Redis.from_url(url, decode_responses=True)
    queue = Queue("outage", connection=url)
    runs: List[str] = []

    def handler(name):
        def run(job):
            runs.append(name)
            time.sleep(15)
            return name
        return run

    job = queue.add("long", {})
    reported: List[BaseException] = []
    first = Worker("outage", handler("first"), connection=url, lock_duration=5,
                   stalled_interval=0.5)
    first.on("error", reported.append)
    with first:
        wait_until(lambda: runs == ["first"], 20, "the first worker to take the job")
        with Worker("outage", handler("second"), connection=url, lock_duration=5,
                    stalled_interval=0.5):
            outage(aof_redis, r, queue.keys.job(job.id) + ":lock", timing, 1.8)
            wait_until(lambda: queue.get_job_state(job.id) == "completed", 40)
    assert runs == ["first"]
    assert_recorded_once(queue, r, job.id, "first", reported)
    queue.close()
    r.close()


def test_a_job_finished_during_an_outage_is_recorded_once(aof_redis):
    url = aof_redis.url
    r = redis.Redis.from_url(url, decode_responses=True)
    queue = Queue("finish", connection=url)
    release = threading.Event()
    runs: List[str] = []

    def handler(job):
        runs.append(job.id)
        release.wait(30)
        return "done"

    job = queue.add("x", {})
    reported: List[BaseException] = []
    worker = Worker("finish", handler, connection=url, lock_duration=4, stalled_interval=0.5)
    worker.on("error", reported.append)
    with worker:
        wait_until(lambda: runs == [job.id], 20)
        # It finishes while Redis is down: the write retries.
        outage(aof_redis, r, queue.keys.job(job.id) + ":lock", "just before the next renewal",
               1.8, when_down=release.set)
        wait_until(lambda: queue.get_job_state(job.id) == "completed", 40)
        time.sleep(1.0)              # a rerun would start now (the job would be back in wait)
    assert runs == [job.id]
    assert_recorded_once(queue, r, job.id, "done", reported)
    queue.close()
    r.close()


def test_a_worker_and_run_started_before_redis_is_up(caplog):
    server = RedisServer()               # its port is chosen; Redis starts later
    started: List[str] = []
    both = threading.Event()

    def handler(name):
        def run(job):
            started.append(name)
            if len(started) == 2:
                both.set()
            both.wait(20)                # each worker holds its job until the other has one
            return name
        return run

    early = Worker("early", handler("start"), connection=server.url)
    with pytest.raises(errors.ConnectionError):
        early.start()
    assert not early.is_running          # start() is atomic: the worker is still startable
    waiting = Worker("early", handler("run"), connection=server.url, max_reconnect_delay=0.3)
    caplog.set_level("WARNING", logger="orijs_sync.worker")
    thread = threading.Thread(target=waiting.run, name="test-worker-run")
    thread.start()
    try:
        wait_until(lambda: caplog.text.count("waiting for Redis") >= 3, 20,
                   "run() to retry, logging each try")
        assert thread.is_alive() and not waiting.is_running
        server.start(attempts=1)         # the same port
        early.start()
        queue = Queue("early", connection=server.url)
        jobs = queue.add_bulk([{"name": "x", "data": {}} for _ in range(2)])
        wait_until(lambda: all(queue.get_job_state(j.id) == "completed" for j in jobs), 30)
        assert sorted(queue.get_job(j.id).returnvalue for j in jobs) == ["run", "start"]
        queue.close()
    finally:
        waiting.close(timeout=20)
        thread.join(20)
        early.close(timeout=20)
        server.stop()
    assert not thread.is_alive()


def test_run_gives_up_after_its_connect_timeout_and_on_close():
    server = RedisServer()               # never started
    worker = Worker("never", lambda job: None, connection=server.url, max_reconnect_delay=0.2)
    with pytest.raises(errors.TimeoutError, match="did not answer within 0.5s"):
        worker.run(connect_timeout=0.5)
    assert not worker.is_running
    with pytest.raises(errors.ValidationError, match="connect_timeout"):
        worker.run(connect_timeout=-1)
    for bad in (0, -1, "5"):
        with pytest.raises(errors.ValidationError, match="max_reconnect_delay"):
            Worker("never", lambda job: None, connection=server.url, max_reconnect_delay=bad)
    closing = Worker("never", lambda job: None, connection=server.url)
    thread = threading.Thread(target=closing.run, name="test-worker-run")
    thread.start()
    time.sleep(0.3)
    closing.close(timeout=10)            # from another thread: run() returns
    thread.join(10)
    assert not thread.is_alive()


def test_the_cli_worker_waits_for_redis_then_works(tmp_path):
    server = RedisServer()
    (tmp_path / "cli_tasks.py").write_text("def double(job):\n    return job.data['n'] * 2\n")
    cmd = [sys.executable, "-m", "orijs_sync.cli", "--url", server.url, "worker", "cli",
           "cli_tasks:double"]
    gave_up = subprocess.run([*cmd, "--connect-timeout", "0.5"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert gave_up.returncode == 3 and "did not answer within 0.5s" in gave_up.stderr
    log = tmp_path / "worker.log"
    with open(log, "w") as stderr:
        proc = subprocess.Popen([*cmd, "--max-reconnect-delay", "0.3"], cwd=tmp_path,
                                stderr=stderr, text=True)
    try:
        # Redis starts once the worker has found it down (under load, starting the
        # interpreter alone may take longer than any fixed pause)
        wait_until(lambda: "waiting for Redis" in log.read_text(), 60, "the worker to wait")
        assert proc.poll() is None
        server.start(attempts=1)
        with Queue("cli", connection=server.url) as queue:
            job = queue.add("x", {"n": 21})
            wait_until(lambda: queue.get_job_state(job.id) == "completed", 30)
            assert queue.get_job(job.id).returnvalue == 42
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()


def test_work_resumes_at_once_when_redis_is_back(aof_redis):
    url = aof_redis.url
    done: List[str] = []
    # A long back-off cap: without probing, the fetcher would pause for many seconds.
    worker = Worker("resume", lambda job: done.append(job.id), connection=url,
                    max_reconnect_delay=60, drain_delay=0.5)
    with worker, Queue("resume", connection=url) as queue:
        queue.add("x", {})
        wait_until(lambda: len(done) == 1)
        aof_redis.halt()
        time.sleep(7)                    # the fetcher's pause has grown past 3 s
        aof_redis.restart()
        job = queue.add("x", {})
        # Probes every 0.1 s find Redis back; a generous bound, far under the 6 s pause
        # the back-off alone would take here.
        wait_until(lambda: job.id in done, 4, "the job added after the outage to run")


def test_completions_across_an_outage_settle_once_and_in_time(aof_redis):
    """The events thread and the completion tracker through an outage: every wait is
    settled exactly once; one whose timeout passes during the outage fails in time."""
    url = aof_redis.url
    gate = threading.Event()

    def handler(job):
        if job.data.get("wait"):
            gate.wait(30)
        if job.data.get("fail"):
            raise RuntimeError("no")
        return job.data["n"]

    calls: dict = {}
    lock = threading.Lock()

    def record(corr, kind):
        def call(value):
            with lock:
                calls.setdefault(corr, []).append((kind, value, time.monotonic()))
        return call

    tracker = CompletionTracker(url).start()
    queue = Queue("tracked", connection=url)
    events = QueueEvents("tracked", connection=url)
    registered = {}

    def emit(corr, data, timeout):
        tracker.register("tracked", corr, record(corr, "ok"), record(corr, "error"),
                         timeout=timeout)
        registered[corr] = time.monotonic()
        job = queue.add("x", data)
        tracker.map_job_id("tracked", job.id, corr)
        return job

    try:
        with Worker("tracked", handler, connection=url, concurrency=4):
            before = emit("before", {"n": 1}, 30)              # done before the outage
            wait_until(lambda: "before" in calls)
            after = emit("after", {"n": 2, "wait": True}, 30)  # done after it
            failing = emit("failing", {"n": 3, "wait": True, "fail": True}, 30)
            late = emit("late", {"n": 4, "wait": True}, 1.0)   # times out during it
            future = events.job_future(queue, after.id)
            aof_redis.halt()
            time.sleep(1.8)
            aof_redis.restart()
            gate.set()
            assert future.result(timeout=30) == 2
            wait_until(lambda: len(calls) == 4, 30, "every wait to be settled")
            wait_until(lambda: queue.get_job_state(late.id) == "completed", 30)
            time.sleep(1.0)                                    # any second settling comes now
    finally:
        events.close()
        tracker.stop()
        queue.close()
    assert calls["before"] == [("ok", 1, calls["before"][0][2])]
    assert calls["after"] == [("ok", 2, calls["after"][0][2])]
    [(kind, error, _)] = calls["failing"]
    assert kind == "error" and isinstance(error, errors.JobFailed)
    [(kind, error, at)] = calls["late"]
    assert kind == "error" and isinstance(error, errors.TimeoutError)
    assert at - registered["late"] < 1.0 + 5     # its timeout, give or take a loaded machine
    assert before.id and failing.id
    assert tracker.sizes() == {"pending": 0, "job_ids": 0, "early_results": 0, "unmapped": 0,
                               "timers": 0}


def test_a_lock_that_ran_out_during_a_long_outage_is_reported_and_never_overwritten(aof_redis):
    url = aof_redis.url
    queue = Queue("lost", connection=url)
    r = redis.Redis.from_url(url, decode_responses=True)
    release = threading.Event()
    runs: List[str] = []

    def handler(name):
        def run(job):
            runs.append(name)
            if name == "first":
                release.wait(30)
            return name
        return run

    job = queue.add("x", {})
    reported: List[tuple] = []
    down = threading.Event()
    first = Worker("lost", handler("first"), connection=url, lock_duration=2,
                   stalled_interval=0.5)
    first.on("error", lambda exc: reported.append((exc, down.is_set())))
    first.start()
    try:
        wait_until(lambda: runs == ["first"], 20)
        lock_renewals(r, queue.keys.job(job.id) + ":lock", 1)
        down.set()
        aof_redis.halt()
        # Longer than the lock: told while Redis is still down, by the lock's own clock.
        wait_until(lambda: any(isinstance(e, errors.LockLost) for e, _ in reported), 10)
        aof_redis.restart()
        down.clear()
        with Worker("lost", handler("second"), connection=url, stalled_interval=0.5):
            wait_until(lambda: queue.get_job_state(job.id) == "completed", 30)
        release.set()                    # the first run ends: its result is refused
        wait_until(lambda: len([e for e, _ in reported if isinstance(e, errors.LockLost)]) == 2,
                   10, "the refused write to be reported")
    finally:
        release.set()
        if down.is_set():
            aof_redis.restart()
        first.close(timeout=20)
    lost = [during for e, during in reported if isinstance(e, errors.LockLost)]
    assert lost == [True, False]         # once during the outage, once for the refused write
    assert runs == ["first", "second"]
    assert_recorded_once(queue, r, job.id, "second", [])
    queue.close()
    r.close()


def test_the_first_add_after_redis_restarts_succeeds(aof_redis):
    """``Queue.add`` writes on a raw connection kept between calls: one Redis closed
    (a restart) is found closed before the write and opened again, as redis-py's pool
    does, so the add neither fails nor runs twice."""
    with Queue("restart", connection=aof_redis.url) as queue:
        queue.add("x", {})
        aof_redis.halt()
        aof_redis.restart()
        job = queue.add("x", {})
        assert queue.get_job(job.id) is not None
        assert queue.get_job_counts("waiting")["waiting"] == 2
