"""Sentinel: a primary, a replica and 3 sentinels on loopback ports; a forced failover
while a producer, a worker and a QueueEvents run. Every component must reach the new
primary by itself. The test prints what it measured (jobs lost to asynchronous
replication, recovery time) for the README's at-least-once note."""
from __future__ import annotations

import threading
import time
from typing import List, Set

import pytest
import redis

from orijs_sync import Queue, QueueEvents, Worker, errors
from orijs_sync.testing import SentinelServers, wait_until

TOTAL = 2000


@pytest.fixture
def sentinel_set():
    with SentinelServers(replicas=1, sentinels=3, down_after=1.0, primary_args=[
            "--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"]) as servers:
        yield servers


def test_sentinel_connection_form_and_url_errors(sentinel_set):
    with Queue("plain", connection=sentinel_set.connection) as queue:
        queue.add("x", {})
        primary = redis.Redis(port=sentinel_set.primary_port(), decode_responses=True)
        try:
            assert primary.llen("bull:plain:wait") == 1
        finally:
            primary.close()
        assert "sentinel mymaster" in queue.connection.address
    with pytest.raises(ValueError, match="service_name"):
        Queue("plain", connection={"sentinels": sentinel_set.sentinel_addresses})


@pytest.mark.parametrize("kill", [False, True], ids=["sentinel-failover", "primary-killed"])
def test_2000_jobs_across_a_forced_failover(sentinel_set, kill):
    conn = sentinel_set.connection
    lock = threading.Lock()
    acked: List[str] = []            # ids the primary acknowledged to the producer
    processed: Set[str] = set()
    completions: List[float] = []    # when each handler finished
    events_seen: Set[str] = set()
    stop = threading.Event()

    def handle(job):
        with lock:
            processed.add(job.id)
            completions.append(time.monotonic())
        time.sleep(0.002)

    def on_completed(job_id, value):
        with lock:
            events_seen.add(job_id)

    with Queue("{fo}q", connection=conn) as queue, \
            QueueEvents("{fo}q", connection=conn) as events, \
            Worker("{fo}q", handle, connection=conn, concurrency=8, lock_duration=3,
                   stalled_interval=1):
        events.on("completed", on_completed)

        def produce() -> None:
            i = 0
            while i < TOTAL and not stop.is_set():
                try:
                    job = queue.add("x", {"i": i}, job_id=f"j{i}")
                except (errors.OrijsError, redis.exceptions.RedisError):
                    time.sleep(0.05)         # the primary is moving: try again
                    continue
                with lock:
                    acked.append(job.id)
                i += 1
                time.sleep(0.001)

        producer = threading.Thread(target=produce, name="test-producer")
        producer.start()
        try:
            wait_until(lambda: len(processed) >= TOTAL // 3, 60, "a third of the jobs")
            failover_at = time.monotonic()
            new_port = sentinel_set.failover(kill=kill)
            promoted_at = time.monotonic()
            wait_until(lambda: any(t > promoted_at for t in completions), 60,
                       "a job finished on the new primary")
            recovered_at = min(t for t in completions if t > promoted_at)
            producer.join(120)
            assert not producer.is_alive()
            fresh = redis.Redis(port=new_port, decode_responses=True)
            try:
                def settled() -> bool:
                    return len(_missing(fresh, acked)) == _lost(fresh, acked)
                wait_until(settled, 120, "every job still in Redis to complete")
                lost = _lost(fresh, acked)
            finally:
                fresh.close()
            wait_until(lambda: set(acked) - _lost_ids(new_port, acked) <= events_seen, 60,
                       "completed events from the new primary")
        finally:
            stop.set()
            producer.join(10)
    how = "primary killed" if kill else "SENTINEL FAILOVER"
    print(f"\n{how}: {len(acked)} jobs acknowledged, {len(processed)} processed, "
          f"{lost} lost (acknowledged by the old primary, never replicated), "
          f"promotion took {promoted_at - failover_at:.2f}s, first job done on the new "
          f"primary {recovered_at - promoted_at:.2f}s after it")
    assert len(acked) == TOTAL
    assert lost <= 100          # only writes not yet replicated at the promotion are lost
    assert len(processed) >= TOTAL - lost


def _state(client: redis.Redis, job_id: str) -> str:
    if client.zscore("bull:{fo}q:completed", job_id) is not None:
        return "completed"
    return "present" if client.exists(f"bull:{{fo}}q:{job_id}") else "lost"


def _missing(client: redis.Redis, acked: List[str]) -> List[str]:
    """Acknowledged jobs not completed on the new primary (still to run, or lost)."""
    return [j for j in acked if _state(client, j) != "completed"]


def _lost(client: redis.Redis, acked: List[str]) -> int:
    return sum(1 for j in acked if _state(client, j) == "lost")


def _lost_ids(port: int, acked: List[str]) -> Set[str]:
    client = redis.Redis(port=port, decode_responses=True)
    try:
        return {j for j in acked if _state(client, j) == "lost"}
    finally:
        client.close()


def test_providers_carry_on_across_a_failover(sentinel_set):
    from orijs_sync.events import BullMQEventProvider
    from orijs_sync.workflows import BullMQWorkflowProvider, Workflow

    conn = sentinel_set.connection
    flow = Workflow("Order").step("price", lambda ctx: ctx.data["n"] * 2)
    with BullMQEventProvider(conn, queue_prefix="{sn}.event") as events, \
            BullMQWorkflowProvider(conn, queue_prefix="{sn}.workflow") as workflows:
        events.subscribe("order.created", lambda m: {"id": m.payload["id"]})
        workflows.register(flow)
        events.start()
        workflows.start()
        assert events.emit("order.created", {"id": 1}).result(timeout=20) == {"id": 1}
        assert workflows.execute(flow, {"n": 2}).result(timeout=20)["price"] == 4
        sentinel_set.failover()
        # A call on a connection to the old primary fails (ConnectionError, for the
        # caller to retry); the next one reaches the new primary.
        assert _retried(lambda: events.emit("order.created", {"id": 2}).result(timeout=60)) \
            == {"id": 2}
        assert _retried(lambda: workflows.execute(flow, {"n": 3}).result(timeout=60))["price"] \
            == 6


def _retried(call, attempts: int = 5):
    for attempt in range(attempts):
        try:
            return call()
        except errors.ConnectionError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)
