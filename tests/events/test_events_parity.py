"""OriJS parity for a team porting a TypeScript service (issue 20), on both providers:
EventSubscription's conveniences on top of the Future."""
from __future__ import annotations

import logging
import threading
from concurrent.futures import CancelledError
from typing import Any, List

import pytest

from orijs_sync import errors
from events_helpers import wait_until


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
