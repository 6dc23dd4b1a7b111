"""emit() with a subscriber (BullMQEventProvider) through a seeded schedule of network
faults, two threads calling ``emit(..., timeout=T).result(...)``: every call returns
within T plus a margin, raising only OrijsErrors; every emit whose add succeeded
completes; no event runs twice at once; nothing is stuck once the network heals. And an
emit during a hold longer than its timeout returns within that timeout (stop(timeout)
while Redis is held: test_fault_close.py)."""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import List, Optional

import redis
from fault_helpers import MARGIN, RECOVERY, Bounded, Raised, Runs, ScheduleRun, make_schedule

from orijs_sync import Queue, errors
from orijs_sync.events import BullMQEventProvider
from orijs_sync.testing import wait_until

SEED = 33_002
EMIT_TIMEOUTS = (5.0, 1.5)     # one emitter thread each: the second times out in holds
SHORT_TIMEOUT, SHORT_MARGIN, HOLD = 1.0, 1.5, 3.0
EVENT = "fault.ping"


@dataclass
class Emit:
    n: int
    timeout: float
    job_id: Optional[str] = None
    returned: float = 0.0           # seconds emit() itself took
    elapsed: float = 0.0            # seconds until result() returned or raised
    value: object = None
    error: Optional[BaseException] = None

    @property
    def acknowledged(self) -> bool:
        """Its add succeeded: it has a result, or timed out waiting for one after emit()
        returned well before its timeout (a failed add fails the Future before emit()
        returns, unless the timeout fired first)."""
        if self.job_id is None:
            return False
        if self.error is None:
            return True
        return isinstance(self.error, errors.TimeoutError) \
            and self.returned < self.timeout - 0.5


def test_emit_through_network_faults(proxy, proxied_url, redis_url, namespace):
    runs, raised = Runs(), Raised()
    emits: List[Emit] = []
    lock = threading.Lock()

    def handler(message):
        runs.start(message.event_id)
        try:
            time.sleep(0.005 * (message.payload["n"] % 5))
            return {"n": message.payload["n"]}
        finally:
            runs.end(message.event_id)

    worker_options = dict(concurrency=4, lock_duration=5, stalled_interval=2,
                          max_stalled_count=50, drain_delay=1, max_reconnect_delay=0.5)
    provider = BullMQEventProvider(proxied_url, queue_prefix=f"{namespace}.event",
                                   default_worker_options=worker_options)
    schedule = ScheduleRun(proxy, make_schedule(SEED))
    counter = iter(range(1_000_000))

    def emitter(timeout: float) -> None:
        while not schedule.done():
            with lock:
                record = Emit(next(counter), timeout)
                emits.append(record)
            began = time.monotonic()
            try:
                sub = provider.emit(EVENT, {"n": record.n}, timeout=timeout)
                record.job_id = sub.job_id
                record.returned = time.monotonic() - began
                record.value = sub.result(timeout=timeout + MARGIN)
            except Exception as exc:  # noqa: BLE001 - looked at below
                record.error = exc
                raised.add(f"emit #{record.n}", exc)
            record.elapsed = time.monotonic() - began
            time.sleep(0.1)

    r = redis.Redis.from_url(redis_url, decode_responses=True)
    with contextlib.ExitStack() as stack:
        stack.callback(r.close)
        stack.callback(provider.stop, 10)
        provider.start()
        provider.subscribe(EVENT, handler)
        check = Queue(provider.queue_manager.get_queue_name(EVENT), connection=redis_url)
        stack.callback(check.close)
        keys = check.keys
        threads = [threading.Thread(target=emitter, args=(timeout,), name=f"emitter-{timeout}")
                   for timeout in EMIT_TIMEOUTS]
        stack.callback(lambda: [t.join(30) for t in threads if t.ident is not None])
        stack.callback(schedule.stop)          # first: the emitters end with the schedule
        schedule.start()
        for thread in threads:
            thread.start()
        schedule.join()
        for thread in threads:
            thread.join(max(EMIT_TIMEOUTS) + MARGIN + 15)
        assert not any(t.is_alive() for t in threads), "an emitter hung in emit()"
        timeline = schedule.describe()

        slow = [(e.timeout, round(e.returned, 1), round(e.elapsed, 1), repr(e.error))
                for e in emits if e.elapsed > e.timeout + MARGIN]
        assert slow == [], f"{len(slow)} of {len(emits)} emit(timeout=T).result() calls " \
                           f"took longer than T + {MARGIN}s (T, emit() s, total s, error): " \
                           f"{slow[:8]}; faults: {timeline}"
        wrong = [(e.n, e.value) for e in emits if e.error is None and e.value != {"n": e.n}]
        assert wrong == []

        acked = {e.job_id for e in emits if e.acknowledged}
        print(f"faults: {timeline}\nemits acknowledged: {len(acked)} of {len(emits)}; "
              f"raised: {raised.kinds()}")

        def completed() -> set:
            return set(r.zrange(keys.completed, 0, -1))

        try:
            wait_until(lambda: acked <= completed(), RECOVERY,
                       "every acknowledged event to complete")
        except AssertionError:
            missing = sorted(acked - completed())
            raise AssertionError(
                f"{len(missing)} of {len(acked)} acknowledged events not completed "
                f"{RECOVERY}s after the faults ended: "
                f"{[(j, check.get_job_state(j)) for j in missing[:8]]}; "
                f"faults: {timeline}") from None
        wait_until(lambda: r.llen(keys.wait) + r.llen(keys.active) + r.zcard(keys.delayed)
                   + r.zcard(keys.prioritized) == 0, RECOVERY, "no event left waiting or active")
        assert r.zcard(keys.failed) == 0, [
            (j.id, j.failed_reason) for j in check.get_failed(0, 10)]
        assert runs.overlaps == [], f"{runs.overlaps[:10]}; faults: {timeline}"

    assert len(acked) >= 50, f"too few emits acknowledged: {len(acked)} of {len(emits)}"
    assert raised.foreign() == [], raised.foreign()[:10]


def test_emit_during_a_hold_longer_than_its_timeout_returns_in_time(proxy, proxied_url,
                                                                    redis_url, namespace):
    """Redis held 3 s, emit(timeout=1).result(): the call returns (a result or an
    OrijsError) within its timeout plus a tight margin (it is the only call running),
    not when the hold ends; once released, nothing is left waiting or active."""
    provider = BullMQEventProvider(proxied_url, queue_prefix=f"{namespace}.event")
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    with contextlib.ExitStack() as stack:
        stack.callback(r.close)
        stack.callback(provider.stop, 10)
        provider.start()
        provider.subscribe(EVENT, lambda message: {"n": message.payload["n"]})
        assert provider.emit(EVENT, {"n": 0}, timeout=10).result(timeout=10) == {"n": 0}
        keys = Queue(provider.queue_manager.get_queue_name(EVENT), connection=redis_url).keys
        proxy.hold()
        held_at = time.monotonic()
        try:
            call = Bounded(f"emit(timeout={SHORT_TIMEOUT}).result() during a {HOLD}s hold",
                           lambda: provider.emit(EVENT, {"n": 1}, timeout=SHORT_TIMEOUT)
                           .result(timeout=SHORT_TIMEOUT + HOLD))
            in_time = call.wait(SHORT_TIMEOUT + SHORT_MARGIN)
            time.sleep(max(held_at + HOLD - time.monotonic(), 0))
        finally:
            proxy.release()
        call.finish()
        assert call.raised is None or isinstance(call.raised, errors.OrijsError), \
            repr(call.raised)
        assert in_time, f"{call.what} returned {call.elapsed} s after the call (the hold " \
                        f"ended at {HOLD} s; None: still running 30 s later)"
        wait_until(lambda: r.llen(keys.wait) + r.llen(keys.active) == 0, RECOVERY,
                   "no event left waiting or active")
