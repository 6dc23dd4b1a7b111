"""What BullMQEventProvider writes to Redis, byte for byte, and exchange with a real
Node BullMQ service playing the OriJS (TypeScript) side, in both directions."""
from __future__ import annotations

import json
import subprocess
import time
import uuid
from concurrent.futures import CancelledError
from pathlib import Path

import pytest
import redis
from events_helpers import Recorder, wait_until
from node_stand_in import node_command, node_env, node_reply

from orijs_sync import Queue, errors

HERE = Path(__file__).resolve().parent
NODE_SCRIPT = HERE / "node_orijs_service.js"


@pytest.fixture
def r(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_wire_format_exact_json(bullmq_provider, namespace, r):
    provider = bullmq_provider()
    sub = provider.emit("order.created", {"id": 1, "items": ["a"]}, meta={"traceId": "t"},
                        expects_result=False)
    sub.result(timeout=10)
    queue = f"{namespace}.event.order.created"
    stored = r.hgetall(f"bull:{queue}:{sub.event_id}")
    assert stored["name"] == "event"
    data = json.loads(stored["data"])
    expected = {"version": "1", "eventId": sub.event_id, "eventName": "order.created",
                "payload": {"id": 1, "items": ["a"]}, "meta": {"traceId": "t"},
                "correlationId": sub.correlation_id, "timestamp": data["timestamp"]}
    assert stored["data"] == compact(expected)
    assert isinstance(data["timestamp"], int)
    assert abs(data["timestamp"] - time.time() * 1000) < 600_000   # ms since the epoch
    assert json.loads(stored["opts"]) == {"attempts": 3,
                                          "backoff": {"type": "exponential", "delay": 1000},
                                          "jobId": sub.event_id}
    assert r.lrange(f"bull:{queue}:wait", 0, -1) == [sub.event_id]


def test_event_and_correlation_ids_are_random_uuid4s(bullmq_provider):
    """OriJS makes both ids with randomUUID(): version 4, RFC 4122 variant, lower-case
    text; every one new (they are job ids and correlation keys)."""
    provider = bullmq_provider()
    subs = [provider.emit("ids.made", {"n": n}, expects_result=False) for n in range(300)]
    ids = []
    for sub in subs:
        sub.result(timeout=10)
        for text in (sub.event_id, sub.correlation_id):
            made = uuid.UUID(text)
            assert (made.version, made.variant, str(made)) == (4, uuid.RFC_4122, text)
            ids.append(text)
    assert len(set(ids)) == len(ids) == 600


def test_wire_format_optional_fields_and_merged_options(bullmq_provider, namespace, r):
    provider = bullmq_provider(default_job_options={"attempts": 5, "remove_on_complete": True})
    sub = provider.emit("invoice.sent", [1, 2], idempotency_key="invoice-77",
                        causation_id="cause-1", delay=30, expects_result=False)
    sub.result(timeout=10)
    stored = r.hgetall(f"bull:{namespace}.event.invoice.sent:invoice-77")
    data = json.loads(stored["data"])
    expected = {"version": "1", "eventId": sub.event_id, "eventName": "invoice.sent",
                "payload": [1, 2], "meta": {}, "correlationId": sub.correlation_id,
                "causationId": "cause-1", "timestamp": data["timestamp"],
                "idempotencyKey": "invoice-77"}
    assert stored["data"] == compact(expected)
    assert json.loads(stored["opts"]) == {"attempts": 5,
                                          "backoff": {"type": "exponential", "delay": 1000},
                                          "removeOnComplete": True, "jobId": "invoice-77",
                                          "delay": 30000}
    assert r.zscore(f"bull:{namespace}.event.invoice.sent:delayed", "invoice-77") is not None


def test_duplicate_key_writes_nothing(bullmq_provider, namespace, r):
    provider = bullmq_provider()
    first = provider.emit("dup", {"n": 1}, idempotency_key="same", expects_result=False)
    first.result(timeout=10)
    second = provider.emit("dup", {"n": 2}, idempotency_key="same", expects_result=False)
    second.result(timeout=10)
    stored = json.loads(r.hget(f"bull:{namespace}.event.dup:same", "data"))
    assert stored["eventId"] == first.event_id and stored["payload"] == {"n": 1}
    assert r.llen(f"bull:{namespace}.event.dup:wait") == 1


def test_result_and_failure_stored_as_bullmq_does(bullmq_provider, namespace, r):
    provider = bullmq_provider(default_job_options={"attempts": 1})
    provider.subscribe("calc", lambda m: {"sum": sum(m.payload)})

    def fail(message):
        raise RuntimeError("no such account")

    provider.subscribe("calc.fail", fail)
    ok = provider.emit("calc", [1, 2, 3])
    assert ok.result(timeout=10) == {"sum": 6}
    assert r.hget(f"bull:{namespace}.event.calc:{ok.job_id}", "returnvalue") == '{"sum":6}'
    bad = provider.emit("calc.fail", [])
    with pytest.raises(errors.JobFailed) as info:
        bad.result(timeout=10)
    assert info.value.job_id == bad.job_id
    assert r.hget(f"bull:{namespace}.event.calc.fail:{bad.job_id}", "failedReason") == \
        info.value.failed_reason == "no such account"


def test_event_in_the_typescript_layout_is_handled(bullmq_provider, namespace, redis_url, r):
    """A job written the way the TS provider writes it reaches a Python handler."""
    provider = bullmq_provider()
    rec = Recorder(lambda m: {"seen": m.payload["sku"]})
    provider.subscribe("stock.reserved", rec)
    event_id = str(uuid.uuid4())
    envelope = {"version": "1", "eventId": event_id, "eventName": "stock.reserved",
                "payload": {"sku": "X-1"}, "meta": {"tenant": "acme"},
                "correlationId": str(uuid.uuid4()), "causationId": "upstream-1",
                "timestamp": int(time.time() * 1000), "idempotencyKey": "reserve-X-1"}
    queue = Queue(f"{namespace}.event.stock.reserved", connection=redis_url)
    try:
        queue.add("event", envelope, job_id="reserve-X-1", attempts=3,
                  backoff={"type": "exponential", "delay": 1.0})
        (msg,) = rec.wait_for(1)
        wait_until(lambda: queue.get_job_state("reserve-X-1") == "completed", what="completion")
    finally:
        queue.close()
    assert (msg.event_id, msg.correlation_id, msg.causation_id, msg.idempotency_key) == \
        (event_id, envelope["correlationId"], "upstream-1", "reserve-X-1")
    assert msg.meta == {"tenant": "acme"} and msg.timestamp == envelope["timestamp"]
    assert r.hget(f"bull:{namespace}.event.stock.reserved:reserve-X-1", "returnvalue") == \
        '{"seen":"X-1"}'


def test_removal_by_another_instance_cancels_the_waiter(bullmq_provider):
    """The events stream's "removed" entry settles waiters in every process."""
    emitter = bullmq_provider()
    other = bullmq_provider()
    sub = emitter.emit("remote.cancel", {}, delay=60, idempotency_key="rc-1")
    assert other.cancel("remote.cancel", "rc-1") is True
    with pytest.raises(CancelledError):
        sub.result(timeout=10)
    wait_until(lambda: emitter.stats()["pending"] == 0, what="no pending")


# -- a real Node BullMQ service as the OriJS side ------------------------------------------
def _node_cmd(command: str, args: dict) -> list:
    return node_command(NODE_SCRIPT, command, args)


_node_env, _reply = node_env, node_reply


def test_node_service_handles_a_python_event(bullmq_provider, namespace, redis_url, tmp_path):
    provider = bullmq_provider()
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        _node_cmd("serve", {"url": redis_url, "queue": f"{namespace}.event.mail.send",
                            "count": 1, "readyFile": str(ready)}),
        env=_node_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: ready.exists() or proc.poll() is not None, timeout=30,
                   what="the Node worker")
        assert proc.poll() is None, proc.communicate()
        sub = provider.emit("mail.send", {"to": "a@b.c"}, meta={"traceId": "py"},
                            idempotency_key="mail-1")
        result = sub.result(timeout=20)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert _reply(out, err) == {"completed": 1}
    assert result["handledBy"] == "node"
    assert result["envelope"] == {"version": "1", "eventId": sub.event_id,
                                  "eventName": "mail.send", "payload": {"to": "a@b.c"},
                                  "meta": {"traceId": "py"}, "correlationId": sub.correlation_id,
                                  "timestamp": result["envelope"]["timestamp"],
                                  "idempotencyKey": "mail-1"}


def test_python_handles_a_node_event(bullmq_provider, namespace, redis_url):
    provider = bullmq_provider()
    rec = Recorder(lambda m: {"handledBy": "python", "total": m.payload["qty"] * 2})
    provider.subscribe("cart.checked_out", rec)
    envelope = {"version": "1", "eventId": str(uuid.uuid4()), "eventName": "cart.checked_out",
                "payload": {"qty": 21}, "meta": {"from": "node"},
                "correlationId": str(uuid.uuid4()), "timestamp": int(time.time() * 1000)}
    proc = subprocess.run(
        _node_cmd("emit", {"url": redis_url, "queue": f"{namespace}.event.cart.checked_out",
                           "envelope": envelope}),
        env=_node_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert _reply(proc.stdout, proc.stderr) == {"returnvalue": {"handledBy": "python",
                                                                "total": 42}}
    (msg,) = rec.wait_for(1)
    assert msg.event_id == envelope["eventId"] and msg.meta == {"from": "node"}


def test_scheduled_jobs_carry_the_envelope(bullmq_provider, namespace, redis_url, r):
    provider = bullmq_provider()
    provider.schedule_event("report.daily", schedule_id="daily", every=3600,
                            payload={"kind": "daily"}, meta={"by": "cron"})
    queue = Queue(f"{namespace}.event.report.daily", connection=redis_url)
    try:
        (job_id,) = r.lrange(f"bull:{queue.name}:wait", 0, -1)   # an "every" series runs at once
        stored = r.hgetall(f"bull:{queue.name}:{job_id}")
        assert stored["name"] == "event"
        data = json.loads(stored["data"])
        assert list(data) == ["version", "eventId", "eventName", "payload", "meta",
                              "correlationId", "timestamp"]
        assert (data["version"], data["eventName"], data["payload"], data["meta"]) == \
            ("1", "report.daily", {"kind": "daily"}, {"by": "cron"})
        opts = json.loads(stored["opts"])
        assert (opts["attempts"], opts["backoff"]) == (3, {"type": "exponential", "delay": 1000})
        assert provider.unschedule_event("report.daily", "daily") is True
        assert queue.get_job_scheduler("daily") is None
    finally:
        queue.close()


def test_unreachable_redis_fails_the_future(namespace):
    import socket

    from orijs_sync.events import BullMQEventProvider
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = BullMQEventProvider(f"redis://127.0.0.1:{port}/0", queue_prefix=namespace)
    with provider:
        for expects_result in (True, False):
            sub = provider.emit("lost", {}, expects_result=expects_result)
            with pytest.raises(errors.ConnectionError, match=str(port)):
                sub.result(timeout=30)
        with pytest.raises(errors.ConnectionError):
            provider.subscribe("lost", lambda m: None)
        assert provider.stats()["pending"] == 0
