"""Real data for the group, scheduler and OriJS pages of the dashboard (tests and the
screenshot script): made by the library's own producers and workers, never written by hand,
except the one state no producer leaves on purpose (a group dropped from ``ready``, as a
GroupMQ recovery can leave it)."""
from __future__ import annotations

from typing import Any, Dict, Optional

import redis

from orijs_sync import Queue, Worker
from orijs_sync.events import BullMQEventProvider
from orijs_sync.groups import GroupQueue
from orijs_sync.testing import wait_until
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow, WorkflowFailedError

XSS = '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'


def fill_groups(url: str, name: str, *, hostile: bool = False) -> Dict[str, str]:
    """A group queue with: ``stuck-lock`` (its running job's deadline passed),
    ``customer-1`` (3 jobs waiting in order), ``customer-2`` (2 waiting), a completed and
    a failed job, and ``stuck-lost`` (waiting, dropped from ready). Returns the ids."""
    ids: Dict[str, str] = {}
    with GroupQueue(name, connection=url, job_timeout=0.001, keep_completed=10,
                    keep_failed=10, max_attempts=1) as short:
        ids["lock"] = short.add(group_id="stuck-lock", data={"task": "hangs"}).id
        taken = short.reserve()
        assert taken is not None and taken.id == ids["lock"]
        done = short.add(group_id="done", data={"n": 0})
        job = short.reserve()
        assert job is not None and job.id == done.id
        short.complete(job, {"ok": True})
        bad = short.add(group_id="bad", data={"n": 0})
        job = short.reserve()
        assert job is not None and job.id == bad.id
        short.dead_letter(job, RuntimeError("card declined"))
        ids["failed"] = bad.id
        for n in range(3):
            ids[f"c1-{n}"] = short.add(group_id="customer-1", data={"step": n},
                                       order_ms=1_700_000_000_000 + n).id
        for n in range(2):
            ids[f"c2-{n}"] = short.add(group_id="customer-2", data={"step": n}).id
        ids["lost"] = short.add(group_id="stuck-lost", data={"task": "forgotten"}).id
        if hostile:
            ids["xss"] = short.add(group_id=XSS, data={"note": XSS}).id
        short.client.zrem(short.key("ready"), "stuck-lost")
    client = redis.Redis.from_url(url, decode_responses=True)
    try:   # the lock's deadline (1 ms after the reserve) is behind Redis' clock
        wait_until(lambda: _deadline_passed(client, name, ids["lock"]))
    finally:
        client.close()
    return ids


def _deadline_passed(client: Any, name: str, job_id: str) -> bool:
    deadline = client.zscore(f"groupmq:{name}:processing", job_id)
    seconds, micros = client.time()
    return deadline is not None and deadline < seconds * 1000 + micros // 1000


def fill_scheduler(url: str, queue_name: str, prefix: str = "bull") -> str:
    """A queue with a scheduler every hour and one run already taken and completed."""
    with Queue(queue_name, connection=url, prefix=prefix) as queue:
        first = queue.upsert_job_scheduler("hourly-report", every=3600,
                                           template={"name": "report", "data": {"k": 1}})
        assert first is not None
        with Worker(queue_name, lambda job: {"rows": 3}, connection=url, prefix=prefix) as worker:
            wait_until(lambda: queue.get_completed_count() >= 1)
            worker.close()
        return first.id


def fill_events(url: str, event: str, *, payload: Any = None, prefix: str = "bull") -> None:
    """An event type whose subscriber fails (one attempt)."""
    with BullMQEventProvider(url, default_job_options={"attempts": 1},
                             prefix=prefix) as provider:
        def handler(message: Any) -> Any:
            raise ValueError(f"no stock for {message.payload}")
        provider.subscribe(event, handler)
        future = provider.emit(event, payload if payload is not None else {"sku": "book"})
        try:
            future.result(timeout=20)
        except Exception:   # noqa: BLE001 - the failure is what the page shows
            pass


def refund(ctx: Any) -> None:
    ctx.log.info("refunded")


def fill_workflow(url: str, name: str, *, result: Optional[Any] = None,
                  prefix: str = "bull") -> str:
    """A workflow reserve -> charge -> ship whose ship step fails: charge and reserve are
    rolled back. Returns the flow id."""
    def reserve(ctx: Any) -> Any:
        return {"reserved": result if result is not None else 2}

    def ship(ctx: Any) -> Any:
        raise LookupError("out of stock")
    flow = (Workflow(name).step("reserve", reserve, rollback=refund, attempts=1)
            .step("charge", lambda ctx: {"charged": 15}, rollback=refund, attempts=1)
            .step("ship", ship, attempts=1))
    provider = BullMQWorkflowProvider(url, prefix=prefix)
    provider.register(flow)
    with provider:
        handle = provider.execute(flow, {"order": "1"})
        try:
            handle.result(timeout=30)
        except WorkflowFailedError:
            pass
        return str(handle.id)
