"""What the child processes of the fork tests run (module level, so ``spawn`` can import
them). Each function returns what the test checks, JSON-able. In the ``fork`` modes
the objects were made (and used) by the parent; under ``spawn`` nothing is inherited,
so the objects are either pickled (Queue, FlowProducer, RedisConnection) or made here.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, Optional

import redis

from orijs_sync import FlowProducer, Queue, QueueEvents, Worker, WorkerGroup, errors
from orijs_sync.connection import BlockingClient, RedisConnection
from orijs_sync.events import BullMQEventProvider
from orijs_sync.testing import wait_until
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow


def client_id(conn: Any) -> int:
    conn.send_command("CLIENT", "ID")
    return int(conn.read_response())


def pid_handler(job: Any) -> Dict[str, Any]:
    return {"pid": os.getpid(), "name": job.name}


# -- core -------------------------------------------------------------------
def queue_child(queue: Queue) -> Dict[str, Any]:
    job = queue.add("from-child", {"pid": os.getpid()})
    return {"id": job.id, "state": queue.get_job_state(job.id)}


def connection_child(conn: RedisConnection) -> Dict[str, Any]:
    direct = conn.direct_connection()
    return {"direct_client_id": client_id(direct), "direct_pid_ok": direct.pid == os.getpid(),
            "pooled_client_id": int(conn.client.client_id())}


def blocking_child(blocking: Optional[BlockingClient], conn: RedisConnection,
                   key: str) -> Dict[str, Any]:
    blocking = blocking or conn.blocking_client(1.0)
    popped = blocking.client.bzpopmin(key, timeout=5)
    return {"client_id": int(blocking.client.client_id()), "popped": popped[1] if popped else None}


def worker_child(worker: Optional[Worker], queue: Queue, own_queue: str) -> Dict[str, Any]:
    """The parent's worker copy (fork modes) must be inert; a new one here runs."""
    out: Dict[str, Any] = {}
    if worker is not None:
        out["is_running"] = worker.is_running
        try:
            worker.start()
            out["start"] = "started"
        except errors.InvalidStateError as exc:
            out["start"] = str(exc)
        began = time.monotonic()
        out["closed"] = worker.close(timeout=10)
        out["close_seconds"] = time.monotonic() - began
        time.sleep(1.0)     # a copy that fetched would take "second" now
        out["second_state"] = queue.get_job_state("second")
    own = Queue(own_queue, queue.connection)
    events = QueueEvents(own_queue, queue.connection)
    with Worker(own_queue, pid_handler, queue.connection, drain_delay=1) as mine:
        job = own.add("own", {})
        out["own"] = events.wait_for_job(own, job.id, timeout=20)
        assert mine.is_running
    events.close()
    return out


def group_child(group: Optional[WorkerGroup], worker: Optional[Worker], queue: Queue,
                own_queue: str) -> Dict[str, Any]:
    """The parent's group and its worker (fork modes): the worker copy is inert; a new
    Worker of the same group runs here, on a new engine of this process."""
    out: Dict[str, Any] = {}
    if worker is not None:
        out["is_running"] = worker.is_running
        out["closed"] = worker.close(timeout=10)
        time.sleep(1.0)     # a copy that fetched would take "second" now
        out["second_state"] = queue.get_job_state("second")
    group = group or WorkerGroup(queue.connection)
    own = Queue(own_queue, queue.connection)
    events = QueueEvents(own_queue, queue.connection)
    mine = Worker(own_queue, pid_handler, group=group, drain_delay=1).start()
    job = own.add("own", {})
    out["own"] = events.wait_for_job(own, job.id, timeout=20)
    out["group_closed"] = group.close(timeout=10)
    out["mine_running"] = mine.is_running
    events.close()
    return out


def events_child(events: Optional[QueueEvents], queue: Queue) -> Dict[str, Any]:
    """Add J then K (the parent's worker runs them in that order) and wait for K here;
    the parent waits for J with a callback that must never run in this process."""
    events = events or QueueEvents(queue.name, queue.connection)
    queue.add("j", {}, job_id="J")
    queue.add("k", {}, job_id="K")
    result = events.wait_for_job(queue, "K", timeout=20)
    time.sleep(0.3)
    return {"k": result}


def flow_child(producer: FlowProducer, queue_name: str) -> Dict[str, Any]:
    node = producer.add({"name": "top", "queue_name": queue_name, "data": {},
                         "children": [{"name": "leaf", "queue_name": queue_name, "data": {}}]})
    return {"top": node.job.id, "leaf": node.children[0].job.id}


def timer_child(timer: Any, url: str, key: str) -> Dict[str, Any]:
    client = redis.Redis.from_url(url, decode_responses=True)
    timer.call_later(0.05, lambda: client.rpush(key, f"child-entry@{os.getpid()}"))
    wait_until(lambda: f"child-entry@{os.getpid()}" in client.lrange(key, 0, -1), 10,
               "the child's own timer entry")
    time.sleep(1.0)     # past the parent's entry's deadline: it must not run here
    return {"pid": os.getpid()}


# -- providers ----------------------------------------------------------------
def event_child(provider: Optional[BullMQEventProvider], url: str, queue_prefix: str,
                gate: str) -> Dict[str, Any]:
    """Emit and get the answer here; then open the gate of the parent's pending emit and
    stay up while it completes (its callback must run in the parent only)."""
    own = provider is None
    provider = provider or BullMQEventProvider(url, queue_prefix=queue_prefix).start()
    try:
        result = provider.emit("ping", {"pid": os.getpid()}).result(timeout=20)
        redis.Redis.from_url(url).rpush(gate, "open")
        provider.subscribe("mine", lambda msg: os.getpid())     # a child may run its own
        mine = provider.emit("mine", {}).result(timeout=20)
        time.sleep(1.0)
        return {"result": result, "mine": mine, "pid": os.getpid()}
    finally:
        if own:
            provider.stop()


ADD = (Workflow("Add")
       .step("double", lambda ctx: ctx.data["x"] * 2)
       .step("plus", lambda ctx: ctx.get_result("double") + 1))


def workflow_child(provider: Optional[BullMQWorkflowProvider], url: str,
                   queue_prefix: str) -> Dict[str, Any]:
    own = provider is None
    if provider is None:
        provider = BullMQWorkflowProvider(url, queue_prefix=queue_prefix)
        provider.register(ADD)
        provider.start()
    try:
        handle = provider.execute(ADD, {"x": os.getpid() % 1000})
        return {"result": handle.result(timeout=30)["plus"], "x": os.getpid() % 1000,
                "workers_here": len(provider._workers)}
    finally:
        if own:
            provider.stop()


# -- one Worker built in the parent, started in forked children --------------------
def token_handler(url: str, tokens: str, namespace: str) -> Any:
    """A handler recording ``[pid, lock token]`` in the list ``tokens``, then holding its
    job until ``{namespace}:release:{pid}`` is set; it returns the pid."""
    def handle(job: Any) -> int:
        r = redis.Redis.from_url(url, decode_responses=True)
        r.rpush(tokens, json.dumps([os.getpid(), job.token]))
        release = f"{namespace}:release:{os.getpid()}"
        wait_until(lambda: r.exists(release), 60, "the test's release")
        return os.getpid()
    return handle


def error_recorder(url: str, key: str) -> Any:
    """An ``error`` listener appending ``{pid}:{error class}`` to the list ``key``."""
    def record(exc: BaseException) -> None:
        redis.Redis.from_url(url).rpush(key, f"{os.getpid()}:{type(exc).__name__}")
    return record


def run_until_key(worker: Worker, url: str, stop: str) -> None:
    """Start the (inherited, never started) worker; close it once ``stop`` is set."""
    worker.start()
    r = redis.Redis.from_url(url)
    wait_until(lambda: r.exists(stop), 120, "the test's stop")
    worker.close(timeout=10)
