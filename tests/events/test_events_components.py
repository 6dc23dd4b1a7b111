"""The parts on their own: CompletionTracker (real Redis), the timer, the envelope,
the propagation context, and injecting components into the provider."""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future

import pytest

from orijs_sync import Queue, Worker, errors
from orijs_sync.events import (BullMQEventProvider, CompletionTracker, EventMessage, QueueManager,
                               ScheduledEventManager, current_meta, propagation_context)
from orijs_sync.base.timer import Timer
from orijs_sync.events.context import current_context, handling
from events_helpers import wait_until


@pytest.fixture
def qname(namespace):
    return f"{namespace}.tracked"


@pytest.fixture
def tracker(redis_url):
    t = CompletionTracker(redis_url).start()
    yield t
    t.stop()


@pytest.fixture
def queue(redis_url, qname):
    q = Queue(qname, connection=redis_url)
    yield q
    q.close()


@pytest.fixture
def worker_for(redis_url, qname):
    workers = []

    def start(handler):
        w = Worker(qname, handler, connection=redis_url, concurrency=4)
        w.start()
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.close(timeout=10)


def _future_callbacks():
    fut: Future = Future()
    return fut, fut.set_result, fut.set_exception


def zero(tracker):
    return all(v == 0 for v in tracker.sizes().values())


# -- CompletionTracker ------------------------------------------------------------------
def test_early_result_is_buffered_until_the_job_id_is_mapped(tracker, queue, qname, worker_for):
    worker_for(lambda job: {"v": job.data["v"] * 10})
    fut, ok, err = _future_callbacks()
    tracker.register(qname, "corr-1", ok, err, timeout=0)
    queue.add("event", {"v": 4}, job_id="early-1")
    wait_until(lambda: queue.get_job_state("early-1") == "completed", what="job completion")
    wait_until(lambda: tracker.sizes()["early_results"] == 1, what="the buffered result")
    assert not fut.done()
    tracker.map_job_id(qname, "early-1", "corr-1")
    assert fut.result(timeout=10) == {"v": 40}
    assert zero(tracker)


def test_early_failure_is_buffered_too(tracker, queue, qname, worker_for):
    def fail(job):
        raise RuntimeError("early boom")

    worker_for(fail)
    fut, ok, err = _future_callbacks()
    tracker.register(qname, "corr-2", ok, err, timeout=0)
    queue.add("event", {}, job_id="early-2")
    wait_until(lambda: tracker.sizes()["early_results"] == 1, what="the buffered failure")
    tracker.map_job_id(qname, "early-2", "corr-2")
    with pytest.raises(errors.JobFailed, match="early boom"):
        fut.result(timeout=10)
    assert zero(tracker)


def test_jobs_nobody_here_waits_for_leave_nothing(tracker, queue, qname, worker_for):
    worker_for(lambda job: job.data)
    tracker.watch(qname)
    for i in range(30):
        queue.add("event", {"i": i}, job_id=f"foreign-{i}")
    # A sentinel registered after them: once it settles, the events before it were seen.
    wait_until(lambda: queue.get_job_counts("completed")["completed"] == 30, what="30 jobs")
    fut, ok, err = _future_callbacks()
    tracker.register(qname, "sentinel", ok, err)
    tracker.map_job_id(qname, queue.add("event", "s", job_id="sentinel-job").id, "sentinel")
    assert fut.result(timeout=10) == "s"
    assert zero(tracker)


def test_timeouts_share_one_timer_thread(tracker, qname):
    before = {t for t in threading.enumerate()}
    futures = []
    for i in range(300):
        fut, ok, err = _future_callbacks()
        tracker.register(qname, f"c{i}", ok, err, timeout=0.2)
        tracker.map_job_id(qname, f"never-{i}", f"c{i}")
        futures.append(fut)
    new_threads = {t for t in threading.enumerate()} - before
    assert len(new_threads) <= 1   # at most the timer thread, started lazily
    for fut in futures:
        with pytest.raises(errors.TimeoutError, match=r"queue .* \(job never-\d+\) got no result within 0.2 s"):
            fut.result(timeout=10)
    assert zero(tracker)
    timer_threads = [t for t in threading.enumerate() if t.name == "orijs-completion-timeouts"]
    assert len(timer_threads) >= 1


def test_stop_fails_pending_and_joins_its_threads(redis_url, qname):
    before = set(threading.enumerate())
    tracker = CompletionTracker(redis_url).start()
    fut, ok, err = _future_callbacks()
    tracker.register(qname, "c", ok, err, timeout=60)
    ours = set(threading.enumerate()) - before
    assert ours, "the tracker runs an events thread and a timer thread"
    tracker.stop()
    with pytest.raises(errors.ShutdownError, match="shutting down"):
        fut.result(timeout=1)
    assert not any(t.is_alive() for t in ours)
    assert zero(tracker)
    tracker.stop()
    with pytest.raises(errors.ShutdownError):
        tracker.register(qname, "d", ok, err)


def test_settled_registrations_are_not_settled_twice(tracker, qname):
    calls = []
    tracker.register(qname, "once", calls.append, calls.append, timeout=0)
    tracker.complete(qname, "once", 1)
    tracker.complete(qname, "once", 2)
    tracker.fail(qname, "once", RuntimeError("late"))
    assert calls == [1] and zero(tracker)


# -- injection ----------------------------------------------------------------------------
def test_components_are_injectable(redis_url, namespace):
    qm = QueueManager(redis_url, queue_prefix=f"{namespace}.custom")
    tracker = CompletionTracker(redis_url, default_timeout=5)
    scheduled = ScheduledEventManager(queue_manager=qm)
    provider = BullMQEventProvider(redis_url, queue_manager=qm, completion_tracker=tracker,
                                   scheduled_event_manager=scheduled)
    with provider:
        assert provider.queue_manager is qm and provider.completion_tracker is tracker
        provider.subscribe("ping", lambda m: "pong")
        assert provider.emit("ping", None).result(timeout=10) == "pong"
        assert qm.get_queue_name("ping") == f"{namespace}.custom.ping"
    assert tracker.sizes()["pending"] == 0
    with pytest.raises(errors.ShutdownError):
        qm.get_queue("ping")


def test_queue_manager_merges_options():
    qm = QueueManager(None, default_job_options={"attempts": 5, "priority": 2})
    assert qm.job_options(delay=3, priority=None) == {
        "attempts": 5, "backoff": {"type": "exponential", "delay": 1.0}, "priority": 2, "delay": 3}
    assert QueueManager(None).job_options(attempts=1) == {
        "attempts": 1, "backoff": {"type": "exponential", "delay": 1.0}}
    with pytest.raises(ValueError):
        QueueManager(None, queue_prefix="bad:prefix")


# -- the timer ------------------------------------------------------------------------------
def test_timer_runs_in_deadline_order_and_compacts():
    timer = Timer("orijs-test-timer").start()
    try:
        ran = []
        done = threading.Event()
        timer.call_later(0.15, lambda: (ran.append("late"), done.set()))
        timer.call_later(0.05, lambda: ran.append("early"))
        handles = [timer.call_later(60, lambda: ran.append("never")) for _ in range(100)]
        assert timer.heap_size == 102
        for h in handles:
            assert timer.cancel(h) is True
        assert timer.cancel(handles[0]) is False
        assert len(timer) == 2 and timer.heap_size <= 4
        assert done.wait(10)
        assert ran == ["early", "late"]
        assert timer.heap_size == 0 and len(timer) == 0
    finally:
        timer.stop()
    assert not timer._thread.is_alive()
    with pytest.raises(errors.ShutdownError):
        timer.call_later(1, lambda: None)


def test_an_entry_due_after_the_timers_next_wake_up_does_not_wake_its_thread():
    """The timer thread sleeps until its first deadline. An entry due later (each
    emit's timeout, its earlier one cancelled) leaves it asleep: waking it, once per
    emit, put one more thread on the emitter's path. An earlier entry wakes it, and
    every entry still runs on time."""
    woken = []

    class Counting(threading.Condition):
        def wait(self, timeout=None):
            result = super().wait(timeout)
            woken.append(time.monotonic())
            return result
    timer = Timer("orijs-test-timer")
    timer._cond = Counting()
    timer.start()
    try:
        first = timer.call_later(30, lambda: None)          # the thread now sleeps 30 s
        wait_until(lambda: timer._wakes_at == first.deadline)   # asleep until it
        woken.clear()
        for _ in range(50):                                  # emits one after the other
            timer.cancel(first)
            first = timer.call_later(30, lambda: None)
        time.sleep(0.2)
        assert woken == []
        ran = threading.Event()
        timer.call_later(0.05, ran.set)                      # due sooner: wakes it
        assert ran.wait(5)
        assert woken
    finally:
        timer.stop()


def test_timer_survives_a_failing_callback():
    timer = Timer("orijs-test-timer").start()
    try:
        done = threading.Event()
        timer.call_later(0, lambda: 1 / 0)
        timer.call_later(0.01, done.set)
        assert done.wait(10)
    finally:
        timer.stop()


# -- envelope and context ---------------------------------------------------------------
def test_envelope_round_trip_and_key_order():
    msg = EventMessage.create("a.b", {"x": 1}, {"m": 1}, causation_id="c",
                              idempotency_key="key-1")
    wire = msg.to_dict()
    assert list(wire) == ["version", "eventId", "eventName", "payload", "meta", "correlationId",
                          "causationId", "timestamp", "idempotencyKey"]
    assert EventMessage.from_dict(json.loads(msg.to_json())) == msg
    assert msg.job_id == "key-1"
    plain = EventMessage.create("a.b", None)
    assert plain.job_id == plain.event_id
    assert list(plain.to_dict()) == ["version", "eventId", "eventName", "payload", "meta",
                                     "correlationId", "timestamp"]


def test_envelope_from_foreign_job_data():
    msg = EventMessage.from_job_data({"just": "data"}, event_name="raw", job_id="7",
                                     timestamp=5)
    assert (msg.event_id, msg.event_name, msg.payload, msg.meta, msg.timestamp) == \
        ("7", "raw", {"just": "data"}, {}, 5)
    minimal = EventMessage.from_dict({"eventId": "e", "eventName": "n"})
    assert minimal.meta == {} and minimal.correlation_id == "e" and minimal.version == "1"
    with pytest.raises(ValueError, match="eventName"):
        EventMessage.from_dict({"eventId": "e"})


def test_context_nesting():
    assert current_context() is None and current_meta() == {}
    with propagation_context({"a": 1}):
        assert current_meta() == {"a": 1}
        inner = EventMessage.create("x", None, {"b": 2})
        with handling(inner) as ctx:
            assert ctx.event_id == inner.event_id and current_meta() == {"b": 2}
        assert current_meta() == {"a": 1}
    assert current_context() is None


def test_standalone_scheduled_event_manager(redis_url, namespace):
    """Without a QueueManager: its own scheduled.{event} queues and the simple data form."""
    manager = ScheduledEventManager(redis_url)
    event = f"{namespace}-cleanup"
    seen = []
    worker = Worker(f"scheduled.{event}", lambda job: seen.append((job.name, job.data)),
                    connection=redis_url)
    worker.start()
    try:
        info = manager.schedule(event, "every-hour", every=3600, payload={"dir": "/tmp"},
                                meta={"m": 1})
        assert info.queue_name == f"scheduled.{event}" and info.every == 3600
        wait_until(lambda: seen, what="the first scheduled job")
        name, data = seen[0]
        assert name == event and set(data) == {"payload", "meta", "scheduledAt"}
        assert data["payload"] == {"dir": "/tmp"} and data["meta"] == {"m": 1}
        assert [s.schedule_id for s in manager.schedules] == ["every-hour"]
        assert manager.unschedule(event, "every-hour") is True
        assert manager.schedules == []
    finally:
        worker.close(timeout=10)
        manager.stop()


def test_stop_settles_futures_whose_handler_finished_though_the_events_thread_lags(
        bullmq_provider):
    """Item 3: the result is in Redis when stop() closes the tracker; a busy events thread
    has not read it yet. stop() lets it catch up instead of failing the Future."""
    provider = bullmq_provider()
    done = threading.Event()

    def handler(message):
        done.set()
        return "finished"

    provider.subscribe("lagging", handler)
    provider.completion_tracker.queue_events.on_event(
        lambda ev: time.sleep(2) if ev.event == "active" else None)   # a slow listener
    sub = provider.emit("lagging", {})
    assert done.wait(10)
    provider.stop(timeout=10)
    assert sub.result(timeout=1) == "finished"


class _WrappedWorker:
    """A worker_class that is not a Worker subclass (composition), as an injected class
    may be: the QueueManager must close it all the same."""

    def __init__(self, name, handler, **options):
        self.inner = Worker(name, handler, **options)
        self.name = name
        self.closed = False

    def on(self, event, fn):
        return self.inner.on(event, fn)

    def start(self):
        self.inner.start()
        return self

    def close(self, timeout=None):
        self.closed = True
        return self.inner.close(timeout)


def test_queue_manager_stop_closes_workers_of_an_injected_class(redis_url, namespace):
    from orijs_sync.testing import orijs_threads
    before = set(orijs_threads())
    qm = QueueManager(redis_url, queue_prefix=f"{namespace}.injected", worker_class=_WrappedWorker)
    worker = qm.register_worker("ping", lambda job: "pong")
    assert isinstance(worker, _WrappedWorker) and set(orijs_threads()) - before
    qm.stop(timeout=10)
    assert worker.closed and not worker.inner.is_running
    assert set(orijs_threads()) - before == set()
