"""The provider contract: every test runs against InProcessEventProvider and against
BullMQEventProvider on real Redis (the ``make_provider`` fixture is parametrized)."""
from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime
from concurrent.futures import CancelledError, Future

import pytest

from orijs_sync import errors
from orijs_sync.events import EventMessage, EventSubscription, propagation_context
from events_helpers import Recorder, all_zero, wait_until

FAST_FAIL = {"attempts": 1}


def _uuid(text: str) -> bool:
    return str(uuid.UUID(text)) == text


# -- request / response ----------------------------------------------------------------
def test_emit_returns_the_handler_result(make_provider):
    provider = make_provider()
    provider.subscribe("order.created", lambda m: {"id": m.payload["id"], "ok": True})
    sub = provider.emit("order.created", {"id": 7})
    assert isinstance(sub, EventSubscription) and isinstance(sub, Future)
    assert sub.result(timeout=10) == {"id": 7, "ok": True}
    assert sub.event_name == "order.created" and sub.job_id == sub.event_id


def test_handler_receives_the_envelope(make_provider):
    provider = make_provider()
    rec = Recorder(lambda m: None)
    provider.subscribe("user.signed_up", rec)
    sub = provider.emit("user.signed_up", {"name": "ada", "tags": [1, 2]})
    assert sub.result(timeout=10) is None
    (msg,) = rec.wait_for(1)
    assert isinstance(msg, EventMessage)
    assert msg.version == "1" and msg.event_name == "user.signed_up"
    assert msg.payload == {"name": "ada", "tags": [1, 2]}
    assert msg.meta == {} and msg.causation_id is None and msg.idempotency_key is None
    assert msg.event_id == sub.event_id and msg.correlation_id == sub.correlation_id
    assert _uuid(msg.event_id) and _uuid(msg.correlation_id)
    assert isinstance(msg.timestamp, int) and msg.timestamp > 1_600_000_000_000


def test_payload_goes_through_json(make_provider):
    provider = make_provider()
    provider.subscribe("shape", lambda m: {"payload": m.payload, "type": type(m.payload).__name__})
    assert provider.emit("shape", (1, 2)).result(timeout=10) == {"payload": [1, 2], "type": "list"}


def test_events_wait_for_a_subscriber(make_provider):
    provider = make_provider()
    sub = provider.emit("late.subscriber", {"n": 1}, timeout=0)   # 0 = no timeout
    assert not sub.done()
    provider.subscribe("late.subscriber", lambda m: m.payload["n"] + 1)
    assert sub.result(timeout=10) == 2


def test_fire_and_forget_settles_when_enqueued(make_provider):
    provider = make_provider()
    sub = provider.emit("audit.logged", {"x": 1}, expects_result=False)
    assert sub.result(timeout=10) is None
    rec = Recorder()
    provider.subscribe("audit.logged", rec)
    assert rec.wait_for(1)[0].payload == {"x": 1}
    wait_until(lambda: all_zero(provider), what="empty maps")


def test_concurrent_emits_from_many_threads(make_provider):
    provider = make_provider()
    provider.subscribe("square", lambda m: m.payload * m.payload)
    results = {}

    def client(base):
        subs = [(n, provider.emit("square", n)) for n in range(base, base + 40)]
        for n, sub in subs:
            results[n] = sub.result(timeout=20)

    threads = [threading.Thread(target=client, args=(i * 100,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 240 and all(v == k * k for k, v in results.items())


# -- failures and retries ------------------------------------------------------------
def test_handler_error_fails_the_future(make_provider):
    provider = make_provider(default_job_options=FAST_FAIL)

    def boom(message):
        raise RuntimeError("card declined")

    provider.subscribe("payment.requested", boom)
    with pytest.raises(errors.JobFailed) as info:
        provider.emit("payment.requested", {"amount": 5}).result(timeout=10)
    assert info.value.failed_reason == "card declined"
    assert isinstance(info.value, errors.OrijsError)


def test_retries_follow_the_job_options(make_provider):
    provider = make_provider(default_job_options={"attempts": 3,
                                                  "backoff": {"type": "fixed", "delay": 0.05}})
    calls = []

    def flaky(message):
        calls.append(message.event_id)
        if len(calls) < 3:
            raise RuntimeError(f"attempt {len(calls)}")
        return "third time lucky"

    provider.subscribe("flaky", flaky)
    sub = provider.emit("flaky", None)
    assert sub.result(timeout=15) == "third time lucky"
    assert calls == [sub.event_id] * 3


def test_retries_exhausted(make_provider):
    backoff = {"type": "exponential", "delay": 0.02}
    provider = make_provider(default_job_options={"attempts": 2, "backoff": backoff})
    calls = []

    def always(message):
        calls.append(1)
        raise ValueError("nope")

    provider.subscribe("doomed", always)
    with pytest.raises(errors.JobFailed, match="nope"):
        provider.emit("doomed", {}).result(timeout=15)
    assert len(calls) == 2


def test_result_that_json_cannot_hold_fails_without_retry(make_provider):
    provider = make_provider()   # default 3 attempts: an unrecoverable failure skips them
    calls = []

    def bad(message):
        calls.append(1)
        return {1, 2}

    provider.subscribe("bad.result", bad)
    with pytest.raises(errors.JobFailed, match="JSON"):
        provider.emit("bad.result", {}).result(timeout=15)
    assert calls == [1]


# -- timeouts and shutdown -----------------------------------------------------------
def test_timeout_fails_the_future_and_leaves_nothing(make_provider):
    provider = make_provider()
    sub = provider.emit("nobody.listens", {}, timeout=0.2)
    with pytest.raises(errors.TimeoutError,
                       match=r"event .nobody.listens. \(job .+\) got no result within 0.2 s"):
        sub.result(timeout=10)
    with pytest.raises(TimeoutError):   # the builtin, too
        sub.result()
    assert provider.stats()["pending"] == 0 and provider.stats()["timers"] == 0


def test_default_timeout_applies(make_provider):
    provider = make_provider(default_timeout=0.2)
    with pytest.raises(errors.TimeoutError):
        provider.emit("nobody.listens", {}).result(timeout=10)


def test_stop_fails_pending_futures_with_shutdown(make_provider):
    provider = make_provider()
    subs = [provider.emit("never.handled", {"i": i}, timeout=0) for i in range(5)]
    provider.stop()
    for sub in subs:
        with pytest.raises(errors.ShutdownError):
            sub.result(timeout=10)
    assert all_zero(provider)
    provider.stop()   # idempotent
    with pytest.raises(errors.ShutdownError):
        provider.emit("never.handled", {})


def test_stop_joins_every_thread_it_started(make_provider):
    before = set(threading.enumerate())
    provider = make_provider()
    provider.subscribe("threads.a", lambda m: 1)
    provider.subscribe("threads.b", lambda m: 2)
    assert provider.emit("threads.a", {}).result(timeout=10) == 1
    assert provider.emit("threads.b", {}, timeout=5).result(timeout=10) == 2
    started = set(threading.enumerate()) - before
    assert started
    provider.stop()
    assert [t.name for t in started if t.is_alive()] == []


def test_stop_lets_running_handlers_finish(make_provider):
    provider = make_provider()
    started, release = threading.Event(), threading.Event()

    def slow(message):
        started.set()
        release.wait(10)
        return "finished"

    provider.subscribe("slow", slow)
    sub = provider.emit("slow", {})
    assert started.wait(10)
    stopper = threading.Thread(target=provider.stop)
    stopper.start()
    release.set()
    stopper.join(20)
    assert not stopper.is_alive()
    # The handler finished before stop() returned: its result reaches the emitter.
    assert sub.result(timeout=10) == "finished"


def test_not_started_and_context_manager(make_provider):
    provider = make_provider(start=False)
    early = provider.emit("cm", {})            # accepted before start, as in OriJS
    with provider as p:
        assert p is provider
        p.subscribe("cm", lambda m: "ok")
        assert p.emit("cm", {}).result(timeout=10) == "ok"
        assert early.result(timeout=10) == "ok"
    with pytest.raises(errors.ShutdownError):
        provider.emit("cm", {})


def test_subscribing_again_replaces_the_handler(make_provider):
    """As OriJS's registerWorker swaps the worker."""
    provider = make_provider()
    provider.subscribe("once", lambda m: 1)
    assert provider.emit("once", {}).result(timeout=10) == 1
    provider.subscribe("once", lambda m: 2)
    assert provider.emit("once", {}).result(timeout=10) == 2


# -- validation -------------------------------------------------------------------------
def test_bad_arguments_raise_before_anything_is_written(make_provider):
    provider = make_provider()
    rec = Recorder()
    with pytest.raises(TypeError, match="payload"):
        provider.emit("checked", {"when": object()})
    with pytest.raises(TypeError, match="meta"):
        provider.emit("checked", {}, meta={"x": {1, 2}})
    with pytest.raises(ValueError, match="':'"):
        provider.emit("checked", {}, idempotency_key="order:1")
    with pytest.raises(ValueError, match="integer"):
        provider.emit("checked", {}, idempotency_key="42")
    with pytest.raises(ValueError):
        provider.emit("", {})
    with pytest.raises(ValueError):
        provider.emit("checked", {}, timeout=-1)
    provider.subscribe("checked", rec)
    assert provider.emit("checked", "valid").result(timeout=10) == "valid"
    assert [m.payload for m in rec.wait_for(1)] == ["valid"]


# -- idempotency -------------------------------------------------------------------------
def test_duplicate_idempotency_key_shares_one_outcome(make_provider):
    provider = make_provider()
    gate = threading.Event()
    calls = []

    def handler(message):
        calls.append(message.payload)
        gate.wait(10)
        return {"charged": message.payload}

    provider.subscribe("charge", handler)
    first = provider.emit("charge", 100, idempotency_key="order-1")
    wait_until(lambda: calls, what="handler start")
    second = provider.emit("charge", 999, idempotency_key="order-1")
    assert first.job_id == second.job_id == "order-1"
    assert first.event_id != second.event_id
    gate.set()
    assert first.result(timeout=10) == second.result(timeout=10) == {"charged": 100}
    # A duplicate after the job finished gets the stored outcome.
    late = provider.emit("charge", 5, idempotency_key="order-1")
    assert late.result(timeout=10) == {"charged": 100}
    assert calls == [100]
    wait_until(lambda: provider.stats()["pending"] == 0, what="no pending")


def test_duplicate_of_a_failed_event_fails_too(make_provider):
    provider = make_provider(default_job_options=FAST_FAIL)
    calls = []

    def handler(message):
        calls.append(1)
        raise RuntimeError("out of stock")

    provider.subscribe("reserve", handler)
    with pytest.raises(errors.JobFailed, match="out of stock"):
        provider.emit("reserve", {}, idempotency_key="sku-9").result(timeout=10)
    with pytest.raises(errors.JobFailed, match="out of stock"):
        provider.emit("reserve", {}, idempotency_key="sku-9").result(timeout=10)
    assert calls == [1]


# -- propagation ------------------------------------------------------------------------
def test_meta_and_causation_propagate_from_a_handler(make_provider):
    provider = make_provider()
    seen = Recorder(lambda m: {"shipped": m.payload["order"]})

    def on_order(message):
        # No meta given: the handler's context supplies it, and the cause.
        shipped = provider.emit("order.ship", {"order": message.payload["id"]}).result(timeout=10)
        return {"order": message.payload["id"], **shipped}

    provider.subscribe("order.ship", seen)
    provider.subscribe("order.placed", on_order)
    sub = provider.emit("order.placed", {"id": 3}, meta={"traceId": "t-1", "user": "u9"})
    assert sub.result(timeout=15) == {"order": 3, "shipped": 3}
    (child,) = seen.wait_for(1)
    assert child.meta == {"traceId": "t-1", "user": "u9"}
    assert child.causation_id == sub.event_id
    assert child.correlation_id != sub.correlation_id


def test_propagation_context_outside_handlers(make_provider):
    provider = make_provider()
    rec = Recorder(lambda m: None)
    provider.subscribe("req.event", rec)
    with propagation_context({"requestId": "r-1"}, causation_id="http-123"):
        provider.emit("req.event", 1).result(timeout=10)
        provider.emit("req.event", 2, meta={"explicit": True},
                      causation_id="c-2").result(timeout=10)
    provider.emit("req.event", 3).result(timeout=10)
    by_payload = {m.payload: m for m in rec.wait_for(3)}
    assert by_payload[1].meta == {"requestId": "r-1"} and by_payload[1].causation_id == "http-123"
    assert by_payload[2].meta == {"explicit": True} and by_payload[2].causation_id == "c-2"
    assert by_payload[3].meta == {} and by_payload[3].causation_id is None


# -- delay and cancel -------------------------------------------------------------------
def test_delayed_event_is_delivered(make_provider):
    provider = make_provider()
    provider.subscribe("reminder", lambda m: f"hello {m.payload}")
    assert provider.emit("reminder", "bob", delay=0.2).result(timeout=10) == "hello bob"


def test_cancel_a_delayed_event(make_provider):
    provider = make_provider()
    rec = Recorder()
    provider.subscribe("later", rec)
    sub = provider.emit("later", "cancelled one", delay=60, idempotency_key="remind-1")
    assert provider.cancel("later", "remind-1") is True
    with pytest.raises(CancelledError):
        sub.result(timeout=10)
    assert provider.cancel("later", "remind-1") is False
    assert provider.cancel("later", "no-such-event") is False
    # The subscription's own cancel() does the same for events without a key.
    other = provider.emit("later", "cancelled too", delay=60)
    assert other.cancel() is True and other.cancelled()
    assert provider.emit("later", "delivered").result(timeout=10) == "delivered"
    assert [m.payload for m in rec.messages] == ["delivered"]
    wait_until(lambda: provider.stats()["pending"] == 0, what="no pending")


def test_cancel_refuses_an_event_a_handler_took(make_provider):
    provider = make_provider()
    started, release = threading.Event(), threading.Event()

    def slow(message):
        started.set()
        release.wait(10)
        return "done"

    provider.subscribe("busy", slow)
    sub = provider.emit("busy", {}, idempotency_key="busy-1")
    assert started.wait(10)
    assert provider.cancel("busy", "busy-1") is False
    assert sub.cancel() is False
    release.set()
    assert sub.result(timeout=10) == "done"


# -- schedules ---------------------------------------------------------------------------
def test_schedule_every_delivers_envelopes(make_provider):
    provider = make_provider()
    rec = Recorder(lambda m: None)
    provider.subscribe("report.tick", rec)
    provider.schedule_event("report.tick", schedule_id="ticker", every=0.2, payload={"n": 1},
                            meta={"source": "scheduler"})
    messages = rec.wait_for(2)
    assert provider.unschedule_event("report.tick", "ticker") is True
    for msg in messages:
        assert msg.event_name == "report.tick" and msg.version == "1"
        assert msg.payload == {"n": 1} and msg.meta == {"source": "scheduler"}
    assert provider.unschedule_event("report.tick", "ticker") is False


def test_schedule_cron_is_accepted_and_removed(make_provider):
    provider = make_provider()
    before = int(time.time() * 1000)
    info = provider.schedule_event("report.hourly", schedule_id="hourly", cron="0 * * * *",
                                   payload={})
    assert info.cron == "0 * * * *" and info.schedule_id == "hourly"
    at = datetime.fromtimestamp(info.next_run / 1000)     # local time, as cron reads it
    assert before < info.next_run <= before + 3_600_000 and (at.minute, at.second) == (0, 0)
    assert provider.unschedule_event("report.hourly", "hourly") is True


def test_six_field_cron_reads_seconds_first_as_bullmq(make_provider):
    """Item 11: "30 5 * * * *" is second 30 of minute 5 of every hour (cron-parser's
    reading), not minute 30 of hour 5, in both providers."""
    provider = make_provider()
    before = int(time.time() * 1000)
    info = provider.schedule_event("report.odd", schedule_id="odd", cron="30 5 * * * *")
    at = datetime.fromtimestamp(info.next_run / 1000)
    assert before < info.next_run <= before + 3_600_000
    assert (at.minute, at.second) == (5, 30)
    assert provider.unschedule_event("report.odd", "odd") is True


@pytest.mark.parametrize("kwargs, match", [
    ({"cron": "* * * *"}, "5 fields"),
    ({"cron": "* * * * * * *"}, "5 fields"),
    ({"cron": "61 * * * *"}, "not a valid"),
    ({"every": 0}, "positive"),
    ({"every": -1}, ">= 0"),
    ({"cron": "* * * * *", "every": 5}, "not both"),
    ({}, "needs"),
])
def test_schedule_validation(make_provider, kwargs, match):
    provider = make_provider()
    with pytest.raises(ValueError, match=match):
        provider.schedule_event("report.bad", schedule_id="s", **kwargs)


# -- metrics -----------------------------------------------------------------------------
class Metrics:
    def __init__(self):
        self.added, self.completed, self.failed = [], [], []

    def on_job_added(self, event_name, job_id):
        self.added.append((event_name, job_id))

    def on_job_completed(self, event_name, job_id, duration):
        self.completed.append((event_name, job_id, duration))

    def on_job_failed(self, event_name, job_id, error):
        self.failed.append((event_name, job_id, str(error)))


def test_metrics_hooks(make_provider):
    metrics = Metrics()
    provider = make_provider(metrics=metrics, default_job_options=FAST_FAIL)
    provider.subscribe("measured", lambda m: time.sleep(0.05) or m.payload)

    def fail(message):
        raise RuntimeError("bad")

    provider.subscribe("measured.fail", fail)
    ok = provider.emit("measured", 1)
    ok.result(timeout=10)
    with pytest.raises(errors.JobFailed):
        provider.emit("measured.fail", 2).result(timeout=10)
    wait_until(lambda: metrics.completed and metrics.failed, what="metrics")
    assert ("measured", ok.job_id) in metrics.added
    (name, job_id, duration), = metrics.completed
    assert (name, job_id) == ("measured", ok.job_id) and duration >= 0.05   # the handler's
    assert metrics.failed[0][0] == "measured.fail" and metrics.failed[0][2] == "bad"


def test_stop_honours_its_timeout_and_names_what_still_runs(make_provider, caplog):
    """Item 7: stop(timeout=1) returns at the deadline although a handler still runs."""
    release, started = threading.Event(), threading.Event()

    def stuck(message):
        started.set()
        return release.wait(60) and "released"

    provider = make_provider()
    provider.subscribe("stuck", stuck)
    sub = provider.emit("stuck", {}, timeout=0)
    try:
        assert started.wait(10)
        began = time.monotonic()
        provider.stop(timeout=1)
        took = time.monotonic() - began
        assert took < 30, f"stop(timeout=1) took {took:.1f}s"
        assert "still" in caplog.text and "stuck" in caplog.text
        with pytest.raises(errors.ShutdownError):
            sub.result(timeout=10)
    finally:
        release.set()
