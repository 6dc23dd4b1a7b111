"""emit() in a network black hole (Redis holds traffic: connections stay open, nothing
answers): it returns within its timeout, its Future failed with a TimeoutError naming
the event and its job id; an add Redis takes late runs, and leaves nothing behind."""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
from events_helpers import Recorder, all_zero, wait_until
from fault_proxy import FaultProxy

from orijs_sync import errors
from orijs_sync.events import BullMQEventProvider

MARGIN = 1.5     # seconds over the timeout a call may take (a correctness bound)


@pytest.fixture
def hole(redis_url: str) -> Iterator[FaultProxy]:
    with FaultProxy.before(redis_url) as proxy:
        yield proxy


@pytest.fixture
def provider(hole: FaultProxy, namespace: str) -> Iterator[BullMQEventProvider]:
    p = BullMQEventProvider(hole.url, queue_prefix=f"{namespace}.event").start()
    yield p
    hole.release()
    p.stop(timeout=20)


def timed(call: Any) -> Any:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


@pytest.mark.parametrize("expects_result", [True, False])
def test_emit_returns_within_its_timeout_in_a_black_hole(hole, provider, expects_result):
    handler = Recorder()
    provider.subscribe("held", handler)
    assert provider.emit("held", "warm", timeout=10).result(timeout=10) == "warm"
    hole.hold()
    fut, took = timed(lambda: provider.emit("held", "late", timeout=1.0,
                                            expects_result=expects_result))
    assert took < 1.0 + MARGIN
    with pytest.raises(errors.TimeoutError) as caught:
        fut.result(timeout=1.0 + MARGIN)
    message = str(caught.value)
    assert "'held'" in message and fut.job_id in message and "None" not in message
    hole.release()              # Redis gets the add late: the event runs, as documented
    handler.wait_for(2)
    wait_until(lambda: all_zero(provider), what="nothing left pending")


def test_first_emit_of_a_type_in_a_black_hole(hole, provider):
    provider.subscribe("warm", lambda m: m.payload)
    assert provider.emit("warm", 1, timeout=10).result(timeout=10) == 1
    hole.hold()
    fut, took = timed(lambda: provider.emit("never.watched", 1, timeout=1.0))
    assert took < 1.0 + MARGIN
    with pytest.raises(errors.TimeoutError):
        fut.result(timeout=1.0 + MARGIN)
    hole.release()
    wait_until(lambda: all_zero(provider), what="nothing left pending")
