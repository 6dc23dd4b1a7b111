"""OriJS parity for a team porting a TypeScript service, on both providers:
EventSubscription's conveniences on top of the Future, registration before start()
(also across languages, with the Node stand-in for an OriJS service)."""
from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any, List

import pytest

from orijs_sync import Queue, errors
from events_helpers import wait_until
from node_stand_in import node_process, node_reply

NODE_SCRIPT = Path(__file__).resolve().parent / "node_orijs_service.js"


def test_subscription_callbacks_and_flags(make_provider, caplog):
    provider = make_provider(default_job_options={"attempts": 1})
    gate = threading.Event()
    provider.subscribe("paid", lambda m: gate.wait(30) and {"ok": m.payload["n"]})
    provider.subscribe("refused", lambda m: 1 / 0)
    seen: List[Any] = []
    sub = provider.emit("paid", {"n": 1}, timeout=30)
    assert (sub.is_settled, sub.is_resolved, sub.is_rejected) == (False, False, False)
    assert sub.subscribe(lambda v: seen.append(("result", v))) is sub   # chainable
    assert sub.catch(lambda e: seen.append(("error", e))) is sub
    sub.subscribe(lambda v: 1 / 0)              # logged, the others still run
    sub.subscribe(lambda v: seen.append(("second", v)))
    assert seen == []
    with caplog.at_level(logging.ERROR, logger="orijs_sync.events.subscription"):
        gate.set()
        assert sub.result(timeout=30) == {"ok": 1}
        wait_until(lambda: len(seen) == 2, what="the callbacks")
    assert seen == [("result", {"ok": 1}), ("second", {"ok": 1})]
    assert any("subscribe callback" in r.getMessage() for r in caplog.records)
    assert (sub.is_settled, sub.is_resolved, sub.is_rejected) == (True, True, False)

    caller = threading.get_ident()
    late: List[Any] = []                        # already settled: at once, in this thread
    sub.subscribe(lambda v: late.append((v, threading.get_ident() == caller)))
    assert late == [({"ok": 1}, True)]

    failed = provider.emit("refused", {}, timeout=30)
    errs: List[BaseException] = []
    failed.catch(errs.append).subscribe(lambda v: errs.append(AssertionError("no result")))
    wait_until(lambda: errs, what="the error callback")
    assert isinstance(errs[0], errors.JobFailed) and "division" in str(errs[0])
    assert (failed.is_settled, failed.is_resolved, failed.is_rejected) == (True, False, True)


def test_a_cancelled_emit_reaches_catch(make_provider):
    provider = make_provider()
    provider.subscribe("later", lambda m: "ran")
    sub = provider.emit("later", {}, delay=60)
    errs: List[BaseException] = []
    sub.catch(errs.append)
    assert sub.cancel() is True
    assert len(errs) == 1 and isinstance(errs[0], CancelledError)
    assert sub.is_rejected and not sub.is_resolved
    with pytest.raises(TypeError, match="callable"):
        sub.subscribe("not a function")  # type: ignore[arg-type]


# -- registration before start() ----------------------------------------------------------
def test_subscribe_schedule_and_emit_before_start_take_effect_at_start(make_provider):
    provider = make_provider(start=False)
    seen: List[Any] = []
    provider.subscribe("early.order", lambda m: seen.append(m.payload) or {"n": m.payload})
    provider.subscribe("early.tick", lambda m: seen.append(m.payload) or None)
    info = provider.schedule_event("early.tick", schedule_id="tick", every=3600,
                                   payload="tick")
    assert (info.event_name, info.schedule_id, info.every) == ("early.tick", "tick", 3600)
    sub = provider.emit("early.order", 7, timeout=30)
    with pytest.raises(ValueError):                  # still checked at once
        provider.schedule_event("early.tick", schedule_id="bad", every=-1)
    assert not sub.done() and seen == []             # nothing runs before start()
    provider.start()
    assert sub.result(timeout=30) == {"n": 7}
    wait_until(lambda: "tick" in seen, what="the schedule's first run")
    assert provider.unschedule_event("early.tick", "tick") is True


def test_a_provider_stopped_before_it_started_is_not_dead(make_provider):
    provider = make_provider(start=False)
    provider.subscribe("revived", lambda m: "alive")
    lost = provider.emit("revived", {}, timeout=30)
    provider.stop()
    with pytest.raises(errors.ShutdownError):
        lost.result(timeout=10)
    provider.start()                                 # still startable, still subscribed
    assert provider.emit("revived", {}).result(timeout=30) == "alive"
    provider.stop()
    with pytest.raises(errors.ShutdownError):
        provider.start()                             # a started-then-stopped one is done


# -- register-before-start across languages (a Node stand-in for an OriJS service) -----------
def test_python_registers_before_start_and_answers_a_node_emit(bullmq_provider, namespace,
                                                              redis_url):
    provider = bullmq_provider(start=False)
    provider.subscribe("cart.early", lambda m: {"handledBy": "python", "n": m.payload["n"]})
    envelope = {"version": "1", "eventId": str(uuid.uuid4()), "eventName": "cart.early",
                "payload": {"n": 3}, "meta": {}, "correlationId": str(uuid.uuid4()),
                "timestamp": int(time.time() * 1000)}
    queue = Queue(f"{namespace}.event.cart.early", connection=redis_url)
    with queue, node_process(NODE_SCRIPT, "emit", {"url": redis_url, "queue": queue.name,
                                                   "envelope": envelope}) as proc:
        wait_until(lambda: queue.get_job_counts("waiting")["waiting"] == 1, timeout=30,
                   what="the Node event in the queue")
        assert queue.get_job(envelope["eventId"]).get_state() == "waiting"   # no worker yet
        provider.start()
        out, err = proc.communicate(timeout=30)
    assert node_reply(out, err) == {"returnvalue": {"handledBy": "python", "n": 3}}


def test_a_node_service_registers_before_start_and_python_waits(bullmq_provider, namespace,
                                                               redis_url, tmp_path):
    provider = bullmq_provider()
    ready, start = tmp_path / "ready", tmp_path / "start"
    with node_process(NODE_SCRIPT, "serve", {
            "url": redis_url, "queue": f"{namespace}.event.mail.early", "count": 1,
            "readyFile": str(ready), "startFile": str(start)}) as proc:
        wait_until(lambda: ready.exists() or proc.poll() is not None, timeout=30,
                   what="the Node service registered")
        sub = provider.emit("mail.early", {"to": "x"}, timeout=30)
        assert not sub.done()                       # registered, not started: it waits
        start.write_text("go")
        result = sub.result(timeout=30)
        out, err = proc.communicate(timeout=30)
    assert node_reply(out, err) == {"completed": 1}
    assert result["handledBy"] == "node" and result["envelope"]["payload"] == {"to": "x"}


STRING_RESULTS = [('{"a": 1}', {"a": 1}), ("[1, 2]", [1, 2]), ("42", 42), ("true", True),
                  ("hello", "hello"), ("NaN", "NaN"), ("", "")]


def test_a_string_result_arrives_as_orijs_delivers_it(make_provider):
    """BullMQ's QueueEvents parses the stored value, OriJS's tracker parses a string
    again: JSON text returned as a string reaches the emitter parsed."""
    provider = make_provider()
    for i, (returned, _) in enumerate(STRING_RESULTS):
        provider.subscribe(f"texty.{i}", lambda m, r=returned: r)
    subs = [provider.emit(f"texty.{i}", {}) for i in range(len(STRING_RESULTS))]
    assert [s.result(timeout=30) for s in subs] == [d for _, d in STRING_RESULTS]


def test_callbacks_run_outside_library_locks(make_provider):
    """A callback may call the provider again (emit, stats) without deadlocking."""
    provider = make_provider()
    provider.subscribe("first", lambda m: 1)
    provider.subscribe("second", lambda m: 2)
    nested: List[Any] = []
    provider.emit("first", {}).subscribe(
        lambda v: nested.append((v, provider.stats(), provider.emit("second", {}))))
    wait_until(lambda: nested, what="the callback")
    assert nested[0][0] == 1 and nested[0][2].result(timeout=30) == 2
