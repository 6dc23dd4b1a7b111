"""Workflows shared by the test process (the emitter) and the step processes
(wf_process.py). Handlers report their pid; what must be seen across processes
(rollbacks, run counts, "I started") goes to Redis lists under the test's prefix."""
from __future__ import annotations

import os
import time
from typing import Any, Dict

import redis

from orijs_sync.workflows import Workflow


def make_workflows(url: str, queue_prefix: str) -> Dict[str, Workflow]:
    client = redis.Redis.from_url(url, decode_responses=True)

    def record(kind: str, ctx: Any, what: str) -> None:
        client.rpush(f"{queue_prefix}:{kind}:{ctx.flow_id}", f"{what}@{os.getpid()}")

    def step(name: str):
        def run(ctx: Any) -> Dict[str, Any]:
            record("runs", ctx, name)
            if ctx.data.get("fail_at") == name:
                raise ValueError(f"{name} refused order {ctx.data.get('orderId')}")
            return {"pid": os.getpid(), "meta": ctx.meta, "prior": sorted(ctx.results)}
        return run

    def rollback(name: str):
        def run(ctx: Any) -> None:
            record("rollbacks", ctx, name)
            if ctx.data.get("fail_rollback") == name:
                raise RuntimeError(f"rollback {name} failed")
        return run

    remote = (Workflow("Remote")
              .step("validate", step("validate"), rollback("validate"))
              .step("charge", step("charge"), rollback("charge"))
              .parallel(("email", step("email"), rollback("email")), ("sms", step("sms")))
              .step("fulfill", step("fulfill"), rollback("fulfill")))

    def hold(ctx: Any) -> int:
        client.rpush(f"{queue_prefix}:started", f"{ctx.flow_id}@{os.getpid()}")
        if ctx.data.get("hang_pid") == os.getpid():
            time.sleep(3600)                 # until kill -9
        gate = ctx.data.get("gate")
        if gate:
            assert client.blpop([f"{queue_prefix}:gate:{gate}"], timeout=60), "gate not opened"
        return os.getpid()

    held = (Workflow("Hold").step("hold", hold)
            .step("after", lambda ctx: {"pid": os.getpid(), "hold": ctx.get_result("hold")}))
    return {"Remote": remote, "Hold": held}
