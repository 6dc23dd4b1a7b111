"""Core components used in a child process: ``os.fork()``, multiprocessing ``fork`` and
``spawn``. In the fork modes the parent made and used the object first (open sockets,
running threads); the child must get its own connections and threads, never touch
the parent's pending state, and the parent must carry on unharmed."""
from __future__ import annotations

import json
import os
import signal
import threading

import pytest
import redis

import fork_cases
from forking import MODES, end_child, run_in_child, start_child
from orijs_sync import FlowProducer, Queue, QueueEvents, Worker, WorkerGroup
from orijs_sync.base.timer import Timer
from orijs_sync.connection import RedisConnection
from orijs_sync.testing import wait_until

FORKS = ("os.fork", "fork")


@pytest.mark.parametrize("mode", MODES)
def test_queue(mode, redis_url, qname):
    queue = Queue(qname, redis_url)
    before = queue.add("from-parent", {})
    out = run_in_child(mode, fork_cases.queue_child, queue)
    assert out["state"] == "waiting"
    after = queue.add("from-parent-again", {})         # the parent's pool still works
    assert queue.get_job(out["id"]).data["pid"] != os.getpid()
    assert {before.id, after.id, out["id"]} <= set(queue.client.lrange(queue.keys.wait, 0, -1))
    queue.close()


@pytest.mark.parametrize("mode", MODES)
def test_connection_direct_and_pooled(mode, redis_url):
    conn = RedisConnection(redis_url)
    direct = conn.direct_connection()
    parent_direct = fork_cases.client_id(direct)
    parent_pooled = int(conn.client.client_id())
    out = run_in_child(mode, fork_cases.connection_child, conn)
    assert out["direct_pid_ok"]
    assert out["direct_client_id"] not in (parent_direct, parent_pooled)
    assert out["pooled_client_id"] not in (parent_direct, parent_pooled)
    assert fork_cases.client_id(conn.direct_connection()) == parent_direct   # untouched
    assert int(conn.client.client_id()) == parent_pooled
    conn.close()


@pytest.mark.parametrize("mode", MODES)
def test_blocking_client(mode, redis_url, namespace, r):
    conn = RedisConnection(redis_url)
    key = f"{namespace}:z"
    blocking = conn.blocking_client(1.0)
    parent_id = int(blocking.client.client_id())
    r.zadd(key, {"m1": 1})
    out = run_in_child(mode, fork_cases.blocking_child,
                       None if mode == "spawn" else blocking, conn, key)
    assert out["popped"] == "m1"
    assert out["client_id"] != parent_id
    assert int(blocking.client.client_id()) == parent_id
    blocking.close()
    conn.close()


class HeldJobs:
    """A queue whose job "first" the parent's worker holds active (its handler waits for
    the gate) while job "second" waits behind it."""

    def __init__(self, qname: str, redis_url: str) -> None:
        self.queue = Queue(qname, redis_url)
        self.events = QueueEvents(qname, redis_url)
        self.gate = threading.Event()

    def handler(self, job):
        if job.name == "hold":
            assert self.gate.wait(60)
        return {"pid": os.getpid(), "name": job.name}

    def fill(self) -> None:
        self.queue.add("hold", {}, job_id="first")
        wait_until(lambda: self.queue.get_job_state("first") == "active", 20, "first active")
        self.queue.add("second", {}, job_id="second")

    def assert_the_parent_ran_both(self) -> None:
        self.gate.set()
        for job_id in ("first", "second"):
            assert self.events.wait_for_job(self.queue, job_id, timeout=20)["pid"] == os.getpid()

    def close(self) -> None:
        self.gate.set()
        self.events.close()
        self.queue.close()


@pytest.mark.parametrize("mode", MODES)
def test_worker_started_in_the_parent_is_inert_in_the_child(mode, redis_url, qname):
    """A forked child of a running worker: the copy does not run (start() refuses with
    a clear error), takes no job, renews nothing; close() is quick. A new Worker made
    in the child runs as its own."""
    held = HeldJobs(qname, redis_url)
    worker = Worker(qname, held.handler, redis_url, drain_delay=1, lock_duration=2).start()
    try:
        held.fill()
        out = run_in_child(mode, fork_cases.worker_child,
                           None if mode == "spawn" else worker, held.queue, f"{qname}-own")
        assert out["own"]["name"] == "own" and out["own"]["pid"] != os.getpid()
        if mode != "spawn":
            assert out["is_running"] is False
            assert "create a new Worker" in out["start"] and str(os.getpid()) in out["start"]
            assert out["closed"] is True and out["close_seconds"] < 5
            assert out["second_state"] == "waiting"
        held.assert_the_parent_ran_both()
    finally:
        held.gate.set()
        worker.close(timeout=10)
        held.close()


@pytest.mark.parametrize("mode", MODES)
def test_worker_group_started_in_the_parent(mode, redis_url, qname):
    """A child of a process running a WorkerGroup: the parent's Workers are inert there;
    a Worker the child adds to the same group runs on an engine of the child's own."""
    held = HeldJobs(qname, redis_url)
    group = WorkerGroup(held.queue.connection)
    worker = Worker(qname, held.handler, group=group, drain_delay=1, lock_duration=2).start()
    try:
        held.fill()
        forked = mode != "spawn"
        out = run_in_child(mode, fork_cases.group_child, group if forked else None,
                           worker if forked else None, held.queue, f"{qname}-own")
        assert out["own"]["name"] == "own" and out["own"]["pid"] != os.getpid()
        assert out["group_closed"] is True and out["mine_running"] is False
        if forked:
            assert out["is_running"] is False and out["closed"] is True
            assert out["second_state"] == "waiting"
        held.assert_the_parent_ran_both()
    finally:
        held.gate.set()
        group.close(timeout=10)
        held.close()


@pytest.mark.parametrize("mode", MODES)
def test_queue_events(mode, redis_url, qname, r, namespace):
    """The child waits on its own; the parent's wait (pending at the fork, with a
    callback) is settled in the parent only."""
    queue = Queue(qname, redis_url)
    events = QueueEvents(qname, redis_url)
    worker = Worker(qname, fork_cases.pid_handler, redis_url, drain_delay=1).start()
    key = f"{namespace}:settled-by"
    try:
        queue.add("warm", {}, job_id="warm")
        events.wait_for_job(queue, "warm", timeout=20)        # the tailer runs
        parent_wait = events.job_future(queue, "J")
        parent_wait.add_done_callback(lambda fut: r.rpush(key, os.getpid()))
        out = run_in_child(mode, fork_cases.events_child,
                           None if mode == "spawn" else events, queue)
        assert out["k"]["name"] == "k"
        assert parent_wait.result(timeout=20)["name"] == "j"
        wait_until(lambda: r.llen(key) >= 1, 10, "the parent's callback")
        assert r.lrange(key, 0, -1) == [str(os.getpid())]
    finally:
        worker.close(timeout=10)
        events.close()
        queue.close()


@pytest.mark.parametrize("mode", MODES)
def test_flow_producer(mode, redis_url, qname):
    producer = FlowProducer(redis_url)
    producer.add({"name": "warm", "queue_name": qname, "data": {}})
    events = QueueEvents(qname, redis_url)
    out = run_in_child(mode, fork_cases.flow_child, producer, qname)
    with Worker(qname, fork_cases.pid_handler, redis_url, drain_delay=1):
        queue = producer.queue(qname)
        assert events.wait_for_job(queue, out["top"], timeout=20)["name"] == "top"
        assert queue.get_job_state(out["leaf"]) == "completed"
    events.close()
    producer.close()


@pytest.mark.parametrize("mode", FORKS)
def test_timer_runs_its_own_entries_never_the_parents(mode, redis_url, namespace, r):
    timer = Timer("orijs-test-timer").start()
    key = f"{namespace}:timer"
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    timer.call_later(0.6, lambda: client.rpush(key, f"parent-entry@{os.getpid()}"))
    out = run_in_child(mode, fork_cases.timer_child, timer, redis_url, key)
    wait_until(lambda: r.llen(key) >= 2, 10, "both entries")
    assert sorted(r.lrange(key, 0, -1)) == sorted([f"child-entry@{out['pid']}",
                                                   f"parent-entry@{os.getpid()}"])
    timer.stop()
    client.close()


def test_a_worker_built_before_fork_gets_its_own_lock_tokens_in_each_child(redis_url, qname,
                                                                          namespace, r):
    """One Worker built in the parent, started in two forked children: a child frozen
    while its lock expired, whose job another child took over, must not write the job
    when it wakes (its lock token is not the new owner's), nor make the owner lose it."""
    tokens, stop = f"{namespace}:tokens", f"{namespace}:stop"
    queue = Queue(qname, redis_url)
    job = queue.add("x", {})
    worker = Worker(qname, fork_cases.token_handler(redis_url, tokens, namespace), redis_url,
                    lock_duration=4, skip_stalled_check=True, stalled_interval=0.2,
                    drain_delay=0.5)
    worker.on("error", fork_cases.error_recorder(redis_url, f"{namespace}:errors"))
    children = []
    try:
        children.append(start_child(fork_cases.run_until_key, worker, redis_url, stop))
        wait_until(lambda: r.llen(tokens) == 1, 20, "the first child takes the job")
        os.kill(children[0], signal.SIGSTOP)           # frozen: its lock expires
        wait_until(lambda: worker._check_stalled() or queue.get_job_state(job.id) == "waiting",
                   20, "the stalled check moves the job back to wait", interval=0.1)
        children.append(start_child(fork_cases.run_until_key, worker, redis_url, stop))
        wait_until(lambda: r.llen(tokens) == 2, 20, "the second child takes the job over")
        (first, stale), (second, owner) = [json.loads(t) for t in r.lrange(tokens, 0, -1)]
        assert r.get(queue.keys.lock(job.id)) == owner
        os.kill(first, signal.SIGCONT)
        r.set(f"{namespace}:release:{first}", 1)       # the stale write
        wait_until(lambda: r.lrange(f"{namespace}:errors", 0, -1), 20,
                   "the first child's write refused")
        assert queue.get_job_state(job.id) == "active", "a stale write was accepted"
        # only the stale child saw LockLost (its lock renewer may report it too, beside the
        # refused write, when it runs first after SIGCONT)
        assert set(r.lrange(f"{namespace}:errors", 0, -1)) == {f"{first}:LockLost"}
        r.set(f"{namespace}:release:{second}", 1)
        wait_until(lambda: queue.get_job_state(job.id) == "completed", 20)
        assert queue.get_job(job.id).returnvalue == second
        assert len({stale.split(":")[0], owner.split(":")[0], worker.id}) == 3  # own ids
    finally:
        r.set(stop, 1)
        for pid in children:
            r.set(f"{namespace}:release:{pid}", 1)
            os.kill(pid, signal.SIGCONT)
            end_child(pid)
        queue.close()
