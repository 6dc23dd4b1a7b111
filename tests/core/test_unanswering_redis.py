"""A Redis that keeps connections open but never answers: every call
times out (connection option ``socket_timeout``, default DEFAULT_SOCKET_TIMEOUT), blocking
calls after their block time plus a margin; no thread hangs for ever."""
from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest
import redis

from orijs_sync import Queue, Worker, errors
from orijs_sync.store import connection
from orijs_sync.testing import RedisServer, wait_until

GUARD = 30.0


@pytest.fixture
def silent_port():
    """A loopback port whose listener accepts connections (the kernel does, into the
    backlog) and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield listener.getsockname()[1]
    listener.close()


def _outcome_of(call):
    """Run ``call`` in a thread; what it returned or raised, or "hung" after GUARD s."""
    box = []

    def run():
        try:
            box.append(call())
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD)
    return box[0] if box else "hung"


def test_ordinary_calls_time_out_by_default(silent_port, monkeypatch, qname):
    """Options that set no timeout (redis-py's own default differs between versions: none
    before 6, 5 s in 8) get the library's."""
    monkeypatch.setattr(connection, "DEFAULT_SOCKET_TIMEOUT", 0.2)
    no_timeout = redis.Redis(host="127.0.0.1", port=silent_port, socket_timeout=None)
    queue = Queue(qname, connection=no_timeout)
    try:
        assert isinstance(_outcome_of(queue.get_job_counts), errors.ConnectionError)
        worker = Worker(qname, lambda job: None, connection=no_timeout)
        assert isinstance(_outcome_of(worker.start), errors.ConnectionError)
        plain = Queue(qname, connection={"host": "127.0.0.1", "port": silent_port})
        assert plain.client.connection_pool.connection_kwargs["socket_timeout"] == 0.2
        plain.close()
    finally:
        queue.close()


def test_the_timeout_is_configurable_and_blocking_calls_get_their_block_time(silent_port,
                                                                             qname):
    conn = connection.RedisConnection({"host": "127.0.0.1", "port": silent_port,
                                       "socket_timeout": 0.3})
    try:
        assert conn.client.connection_pool.connection_kwargs["socket_timeout"] == 0.3
        blocking = conn.blocking_client(2.0)
        timeout = blocking.client.connection_pool.connection_kwargs["socket_timeout"]
        assert timeout == 2.0 + connection.BLOCKING_MARGIN
        began = time.monotonic()
        outcome = _outcome_of(lambda: blocking.client.bzpopmin("k", timeout=0.1))
        assert isinstance(outcome, errors.ConnectionError)
        assert time.monotonic() - began >= 0.1 + connection.BLOCKING_MARGIN - 0.5
        blocking.close()
    finally:
        conn.close()


def test_a_worker_on_a_frozen_redis_stops_its_threads(monkeypatch, qname):
    """SIGSTOP the test's own redis-server mid-job: the lock renewer's call must time out,
    so close() leaves no thread behind even while Redis stays frozen."""
    monkeypatch.setattr(connection, "DEFAULT_SOCKET_TIMEOUT", 1.0)
    server = RedisServer().start()
    pid = server._proc.pid
    running, release = threading.Event(), threading.Event()

    def handler(job):
        running.set()
        release.wait(GUARD)

    try:
        with Queue(qname, connection=server.url) as queue:
            queue.add("x", {})
        no_timeout = redis.Redis.from_url(server.url, socket_timeout=None)
        worker = Worker(qname, handler, connection=no_timeout, lock_duration=2,
                        drain_delay=0.5).start()
        assert running.wait(GUARD)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(1.5)                 # the renewer (every 1 s) is now waiting for Redis
        release.set()
        worker.close(timeout=1)
        wait_until(lambda: not [t for t in threading.enumerate()
                                if t.name.startswith("orijs-") and qname in t.name], 20,
                   what="the worker's threads end while Redis is frozen")
    finally:
        release.set()
        os.kill(pid, signal.SIGCONT)
        server.stop()


def test_close_without_timeout_returns_when_redis_freezes_under_an_idle_worker(monkeypatch,
                                                                             qname):
    """The stalled checker (every 0.3 s here) is caught in a call when Redis freezes:
    close(timeout=None) must not join it for ever."""
    monkeypatch.setattr(connection, "DEFAULT_SOCKET_TIMEOUT", 1.0)
    server = RedisServer().start()
    pid = server._proc.pid
    try:
        no_timeout = redis.Redis.from_url(server.url, socket_timeout=None)
        worker = Worker(qname, lambda job: None, connection=no_timeout, stalled_interval=0.3,
                        drain_delay=0.5).start()
        time.sleep(0.5)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(1.0)                 # the checker's next call is waiting for Redis
        assert _outcome_of(lambda: worker.close(timeout=None)) is True
    finally:
        os.kill(pid, signal.SIGCONT)
        server.stop()


@pytest.mark.parametrize("jobs", [1, 2], ids=["written-by-its-handler-thread",
                                             "written-by-the-finisher"])
def test_close_without_timeout_gives_up_an_outcome_about_a_lock_after_its_handler(monkeypatch,
                                                                                  qname, jobs):
    """Redis freezes (SIGSTOP: sockets open, no answer) while jobs run: their outcomes are
    retried for one lock duration after the handlers return, then left to stall recovery,
    so close(timeout=None) returns within about the lock (plus socket timeouts). Once Redis
    answers again, another worker's stalled checker takes the jobs: nothing is lost."""
    monkeypatch.setattr(connection, "DEFAULT_SOCKET_TIMEOUT", 1.0)
    lock = 3.0
    server = RedisServer().start()
    pid = server.pid
    running, release = threading.Semaphore(0), threading.Event()
    reported = []

    def handler(job):
        running.release()
        release.wait(GUARD)
        return "first"

    try:
        with Queue(qname, connection=server.url) as queue:
            added = [queue.add("x", {}) for _ in range(jobs)]
            worker = Worker(qname, handler, connection=server.url, lock_duration=lock,
                            drain_delay=0.5, skip_stalled_check=True, concurrency=jobs)
            worker.on("error", reported.append)
            worker.start()
            for _ in added:
                assert running.acquire(timeout=GUARD)
            os.kill(pid, signal.SIGSTOP)
            released = time.monotonic()
            release.set()
            outcome = _outcome_of(lambda: worker.close(timeout=None))
            took = time.monotonic() - released
            assert outcome is True, outcome
            assert took < lock + 6 * connection.DEFAULT_SOCKET_TIMEOUT, took
            assert not [t for t in threading.enumerate()
                        if t.name.startswith("orijs-") and qname in t.name]
            assert any(isinstance(e, errors.LockLost) for e in reported)
            os.kill(pid, signal.SIGCONT)
            assert [queue.get_job_state(j.id) for j in added] == ["active"] * jobs  # left
            with Worker(qname, lambda j: "taken over", connection=server.url,
                        stalled_interval=0.3, drain_delay=0.5):
                wait_until(lambda: all(queue.get_job_state(j.id) == "completed"
                                       for j in added), GUARD,
                           what="the stalled checker takes the jobs over")
            assert [queue.get_job(j.id).returnvalue for j in added] == ["taken over"] * jobs
    finally:
        release.set()
        os.kill(pid, signal.SIGCONT)
        server.stop()
