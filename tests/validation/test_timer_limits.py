"""The shared timer thread never dies of a huge or odd delay; emit() refuses timeouts
the timer cannot hold."""
from __future__ import annotations

import math
import threading

import pytest

from orijs_sync import errors
from orijs_sync.base.timer import Timer
from orijs_sync.events import InProcessEventProvider


def test_a_far_deadline_does_not_kill_the_timer_thread() -> None:
    timer = Timer("test-timer").start()
    try:
        timer.call_later(1e12, lambda: None)         # beyond threading.TIMEOUT_MAX
        first, second = threading.Event(), threading.Event()
        timer.call_later(0.01, first.set)
        assert first.wait(5)
        timer.call_later(0.01, second.set)           # the thread is still alive
        assert second.wait(5)
    finally:
        timer.stop()


def test_a_failing_callback_does_not_stop_the_timer() -> None:
    timer = Timer("test-timer").start()
    try:
        done = threading.Event()
        timer.call_later(0, lambda: 1 / 0)
        timer.call_later(0.01, done.set)
        assert done.wait(5)
    finally:
        timer.stop()


@pytest.mark.parametrize("delay", [math.nan, "soon", None])
def test_timer_refuses_a_delay_that_is_not_a_number(delay: object) -> None:
    timer = Timer("test-timer").start()
    try:
        with pytest.raises(errors.InvalidArgumentType if not isinstance(delay, float)
                           else errors.InvalidArgument, match="delay"):
            timer.call_later(delay, lambda: None)  # type: ignore[arg-type]
    finally:
        timer.stop()


@pytest.mark.parametrize("timeout", [1e12, math.inf, math.nan, -1])
def test_emit_refuses_a_timeout_the_timer_cannot_hold(timeout: float) -> None:
    with InProcessEventProvider() as provider:
        with pytest.raises(errors.InvalidArgument, match="timeout"):
            provider.emit("x.y", {}, timeout=timeout)
        provider.subscribe("x.y", lambda msg: msg.payload)
        assert provider.emit("x.y", {"ok": 1}, timeout=5).result(timeout=5) == {"ok": 1}


@pytest.mark.parametrize("timeout", [1e12, math.inf])
def test_waiting_on_a_result_with_a_huge_timeout_works(timeout: float) -> None:
    with InProcessEventProvider() as provider:
        provider.subscribe("x.y", lambda msg: msg.payload)
        assert provider.emit("x.y", {"ok": 1}).result(timeout=timeout) == {"ok": 1}


def test_a_result_that_does_not_come_times_out_with_the_librarys_error() -> None:
    with InProcessEventProvider() as provider:
        sub = provider.emit("x.nobody", {}, timeout=0)
        with pytest.raises(errors.TimeoutError):
            sub.result(timeout=0.05)
        with pytest.raises(errors.InvalidArgument, match="timeout"):
            sub.result(timeout=math.nan)
