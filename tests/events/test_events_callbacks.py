"""Done-callbacks of emit futures run on the provider's callback thread: never on a
worker's handler thread (whose slot they would hold) nor on one ``stop()`` joins."""
from __future__ import annotations

import threading
from typing import Any, Dict

from events_helpers import wait_until


def test_stop_from_an_emit_callback_returns(bullmq_provider):
    provider = bullmq_provider()
    provider.subscribe("stop.me", lambda m: m.payload)
    seen: Dict[str, Any] = {}

    def stop_here(fut: Any) -> None:
        seen["thread"] = threading.current_thread().name
        provider.stop()                      # no timeout: it must return by itself
        seen["stopped"] = True

    fut = provider.emit("stop.me", 1, timeout=10)
    fut.add_done_callback(stop_here)
    assert fut.result(timeout=10) == 1
    wait_until(lambda: seen.get("stopped"), timeout=20, what="stop() from the callback")
    assert not seen["thread"].startswith("orijs-worker")


def test_a_callback_that_emits_and_waits_at_concurrency_1(bullmq_provider):
    provider = bullmq_provider(default_worker_options={"concurrency": 1})
    provider.subscribe("nested", lambda m: m.payload)
    inner: Dict[str, Any] = {}

    def emit_and_wait(fut: Any) -> None:
        try:
            inner["value"] = provider.emit("nested", "inner", timeout=5).result(timeout=5)
        except Exception as exc:  # noqa: BLE001 - recorded for the assert
            inner["value"] = exc

    outer = provider.emit("nested", "outer", timeout=10)
    outer.subscribe(lambda value: emit_and_wait(outer))
    assert outer.result(timeout=10) == "outer"
    wait_until(lambda: "value" in inner, timeout=20, what="the nested emit")
    assert inner["value"] == "inner"
