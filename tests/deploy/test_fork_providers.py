"""The event and workflow providers in a child process: made, started and used by the
parent before ``os.fork()`` / multiprocessing ``fork`` (the gunicorn ``--preload``
case), or made in a ``spawn`` child. The child gets its own answers; the parent's
pending emits settle in the parent only."""
from __future__ import annotations

import os

import pytest
import redis

import fork_cases
from forking import MODES, run_in_child
from orijs_sync.events import BullMQEventProvider
from orijs_sync.testing import wait_until
from orijs_sync.workflows import BullMQWorkflowProvider


@pytest.mark.parametrize("mode", MODES)
def test_event_provider(mode, redis_url, namespace, r):
    prefix = f"{namespace}.event"
    gate = f"{namespace}:gate"
    settled_by = f"{namespace}:settled-by"
    subscriber = BullMQEventProvider(redis_url, queue_prefix=prefix).start()
    emitter = BullMQEventProvider(redis_url, queue_prefix=prefix).start()
    gate_client = redis.Redis.from_url(redis_url)
    try:
        subscriber.subscribe("ping", lambda msg: {"to": msg.payload["pid"], "by": os.getpid()})
        subscriber.subscribe("later", lambda msg: bool(gate_client.blpop([gate], timeout=30)))
        assert emitter.emit("ping", {"pid": os.getpid()}).result(timeout=20)["to"] == os.getpid()
        pending = emitter.emit("later", {}, timeout=60)          # pending across the fork
        pending.add_done_callback(lambda fut: r.rpush(settled_by, os.getpid()))
        out = run_in_child(mode, fork_cases.event_child,
                           None if mode == "spawn" else emitter, redis_url, prefix, gate)
        assert out["result"]["by"] == os.getpid()        # the parent's subscriber answered
        assert out["result"]["to"] != os.getpid()        # ... the child's own emit
        assert out["mine"] == out["pid"]                 # the child's own subscriber
        assert pending.result(timeout=20) is True
        wait_until(lambda: r.llen(settled_by) >= 1, 10, "the parent's callback")
        assert r.lrange(settled_by, 0, -1) == [str(os.getpid())]
        assert emitter.stats()["pending"] == 0
    finally:
        emitter.stop(timeout=10)
        subscriber.stop(timeout=10)
        gate_client.close()


@pytest.mark.parametrize("mode", MODES)
def test_workflow_provider(mode, redis_url, namespace):
    prefix = f"{namespace}.workflow"
    provider = BullMQWorkflowProvider(redis_url, queue_prefix=prefix)
    provider.register(fork_cases.ADD)
    provider.start()
    try:
        assert provider.execute(fork_cases.ADD, {"x": 20}).result(timeout=30)["plus"] == 41
        out = run_in_child(mode, fork_cases.workflow_child,
                           None if mode == "spawn" else provider, redis_url, prefix)
        assert out["result"] == out["x"] * 2 + 1
        if mode != "spawn":
            assert out["workers_here"] == 0      # the parent's workers are not the child's
        assert provider.execute(fork_cases.ADD, {"x": 1}).result(timeout=30)["plus"] == 3
    finally:
        provider.stop(timeout=10)
