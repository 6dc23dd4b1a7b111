"""The whole lifecycle of every component on one connection (a URL or a dict of options):
what the TLS and ACL tests run. Returns nothing; any failure raises."""
from __future__ import annotations

import os
import threading
import uuid
from typing import Any

from orijs_sync import FlowProducer, Queue, QueueEvents, Worker
from orijs_sync.events import BullMQEventProvider
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow

TIMEOUT = 30


def run_lifecycle(connection: Any) -> None:
    token = uuid.uuid4().hex[:8]
    _core(connection, f"life-{token}")
    _events(connection, f"life-{token}.event")
    _workflows(connection, f"life-{token}.workflow")


def _core(connection: Any, name: str) -> None:
    queue = Queue(name, connection)
    events = QueueEvents(name, connection)
    producer = FlowProducer(connection)
    try:
        queue.add("a", {"n": 1}, job_id="a", attempts=2, backoff=0.01)
        queue.add("delayed", {"n": 2}, delay=0.2)
        queue.add("prio", {"n": 3}, priority=5)
        queue.add("fails", {"fail": True}, job_id="f")
        queue.upsert_job_scheduler("sched", every=60, template={"name": "repeat",
                                                                "data": {"n": 4}})
        queue.pause()
        assert queue.is_paused()
        queue.resume()
        tree = producer.add({"name": "top", "queue_name": name, "data": {},
                             "children": [{"name": "leaf", "queue_name": name, "data": {}}]})
        seen = threading.Event()
        events.on("completed", lambda job_id, value: seen.set())

        def handler(job: Any) -> Any:
            job.update_progress(50)
            job.log("working")
            if job.data.get("fail"):
                raise ValueError("refused")
            return {"pid": os.getpid(), "name": job.name}

        with Worker(name, handler, connection, concurrency=4, drain_delay=0.5,
                    stalled_interval=1, lock_duration=2):
            assert events.wait_for_job(queue, "a", timeout=TIMEOUT)["name"] == "a"
            assert events.wait_for_job(queue, tree.job.id, timeout=TIMEOUT)["name"] == "top"
            try:
                events.wait_for_job(queue, "f", timeout=TIMEOUT)
                raise AssertionError("job f should have failed")
            except Exception as exc:  # noqa: BLE001 - JobFailed expected
                assert "refused" in str(exc), exc
            assert seen.wait(TIMEOUT)
            assert [w["name"] for w in queue.get_workers()] == [name]   # named and listed
        assert queue.get_job_counts()["completed"] >= 3
        assert queue.get_job("a").returnvalue["name"] == "a"
        assert queue.get_job_logs("a")
        queue.get_completed()
        queue.get_failed()[0].retry()
        queue.remove_job_scheduler("sched")
        queue.clean(0, state="completed")
        queue.drain(delayed=True)
        queue.obliterate(force=True)
    finally:
        events.close()
        producer.close()
        queue.close()


def _events(connection: Any, prefix: str) -> None:
    with BullMQEventProvider(connection, queue_prefix=prefix) as provider:
        provider.subscribe("ping", lambda msg: {"pong": msg.payload["n"]})
        assert provider.emit("ping", {"n": 7}).result(timeout=TIMEOUT) == {"pong": 7}
        provider.emit("ping", {"n": 8}, expects_result=False).result(timeout=TIMEOUT)
        provider.schedule_event("ping", schedule_id="s", every=60, payload={"n": 9})
        assert provider.unschedule_event("ping", "s")
        later = provider.emit("ping", {"n": 10}, delay=60)
        assert later.cancel()


ADD = (Workflow("Add")
       .step("double", lambda ctx: ctx.data["x"] * 2)
       .step("plus", lambda ctx: ctx.get_result("double") + 1))


def _workflows(connection: Any, prefix: str) -> None:
    provider = BullMQWorkflowProvider(connection, queue_prefix=prefix)
    provider.register(ADD)
    provider.start()
    try:
        handle = provider.execute(ADD, {"x": 4}, idempotency_key=f"{prefix}-flow")
        assert handle.result(timeout=TIMEOUT)["plus"] == 9
        assert provider.get_status(handle.id) == "completed"
    finally:
        provider.stop(timeout=10)
