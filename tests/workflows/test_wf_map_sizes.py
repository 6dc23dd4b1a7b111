"""Thousands of workflows leave no entry behind in any local map, no timer entry, no
thread. InProcess runs 5,000; BullMQ runs 1,500 (about 200 workflows/s on a 2-core
machine, so 5,000 would take ~30 s of a shared CI box for no extra coverage)."""
from __future__ import annotations

import threading

import pytest

from orijs_sync.workflows import Workflow, WorkflowFailedError, WorkflowTimeoutError
from wf_helpers import GUARD, wait_until

COUNTS = {"in_process": 5_000, "bullmq": 1_500, "cluster": 500}


def test_map_sizes_after_many_workflows(make_provider):
    total = COUNTS[make_provider.kind]
    threads_before = set(threading.enumerate())
    release = threading.Event()

    def last(ctx):
        n = ctx.data["n"]
        if n < 0:
            release.wait(GUARD)          # held past its timeout
        if n % 97 == 0:
            raise ValueError(f"multiple of 97: {n}")
        return n

    wf = (Workflow("Load").step("a", lambda ctx: ctx.data["n"])
          .parallel(("b", lambda ctx: 1), ("c", lambda ctx: 2),
                    ("r", lambda ctx: 3, lambda ctx: None))
          .step("d", last))
    provider = make_provider(wf, flow_state_cleanup_delay=0.05, concurrency=16)
    held = [provider.execute(wf, {"n": -n}, timeout=0.1) for n in range(1, 4)]
    answered, failed = [], []
    for n in range(1, total + 1):
        if n % 97 == 0:
            failed.append(provider.execute(wf, {"n": n}))
        elif n % 10 == 5:                # pairs sharing one idempotency key: one flow
            answered.append((n, provider.execute(wf, {"n": n}, idempotency_key=f"pair-{n}")))
            answered.append((n, provider.execute(wf, {"n": n}, idempotency_key=f"pair-{n}")))
        else:
            answered.append((n, provider.execute(wf, {"n": n})))
    for n, handle in answered:
        assert handle.result(timeout=120)["d"] == n
    for handle in failed:
        with pytest.raises(WorkflowFailedError):
            handle.result(timeout=120)
    for handle in held:
        with pytest.raises(WorkflowTimeoutError):
            handle.result(timeout=GUARD)
    release.set()
    assert len(answered) + len(failed) > total
    wait_until(lambda: all(v == 0 for v in provider.stats().values()), timeout=60,
               what=f"empty maps, got {provider.stats()}")
    provider.stop(timeout=GUARD)
    assert provider.stats() == {"pending": 0, "flow_states": 0, "timers": 0, "timer_heap": 0}
    leaked = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    assert leaked == []


def test_states_stay_bounded_without_cleanup(make_provider):
    wf = Workflow("Many").step("a", lambda ctx: ctx.data)
    provider = make_provider(wf, max_flow_states=100, flow_state_cleanup_delay=3600)
    handles = [provider.execute(wf, n) for n in range(1_000)]
    for n, handle in enumerate(handles):
        assert handle.result(timeout=120) == {"a": n}
    stats = provider.stats()
    assert stats["pending"] == 0 and stats["flow_states"] == 100
    # One cleanup entry per remaining state; evicted states' entries were cancelled and
    # the heap is rebuilt, so it holds at most about twice the live entries.
    assert stats["timers"] == 100 and stats["timer_heap"] <= 200
