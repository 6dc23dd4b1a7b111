"""BullMQEventProvider: distributed events over BullMQ queues, ``emit()`` returns a Future.

Composes a ``QueueManager`` (a queue and a worker per event type), a
``CompletionTracker`` (request-response over one events thread) and a
``ScheduledEventManager`` (cron / every schedules); each is injectable.

    provider = BullMQEventProvider("redis://localhost:6379/0")
    provider.start()
    provider.subscribe("order.created", lambda msg: {"ok": msg.payload["id"]})
    provider.emit("order.created", {"id": 1}).result(timeout=5)   # -> {"ok": 1}
    provider.stop()

As in OriJS, ``subscribe``, ``schedule_event`` and ``emit`` may come before ``start()``:
they are checked at once and take effect when ``start()`` runs (in the order they were
made; a deferred emit's timeout counts from then). ``stop()`` of a provider that never
started fails the deferred emits with ``ShutdownError`` and leaves it startable.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .. import errors
from ..base import fork
from ..base import validate as check
from ..base.lanes import Lanes
from ..base.pools import deadline_of, remaining
from ..base.util import Seconds, to_seconds
from ..engine.routing import sendable
from ..job import Job
from ..worker_group import WorkerGroup
from . import context
from .completion_tracker import DEFAULT_TIMEOUT, CompletionTracker
from .message import EVENT_JOB_NAME, EventMessage, validate_event_name
from .queue_manager import QueueManager, QueueMetrics
from .scheduled import ScheduledEventManager, ScheduleInfo, validate_schedule
from .subscriber import EventHandler, Subscriber, handle
from .subscription import EventSubscription

log = logging.getLogger(__name__)

__all__ = ["BullMQEventProvider", "EventHandler"]

SENDER_LANES = 4     # threads adding emitted events (each caller thread keeps to one)

# States in which an event has not been taken by a handler yet (cancel() may remove it).
PENDING_STATES = frozenset({"delayed", "waiting", "prioritized", "paused"})


class BullMQEventProvider:
    """Events on Redis, readable and writable by OriJS (TypeScript) services.

    Durations are seconds. ``default_timeout`` applies to ``emit`` calls that give no
    ``timeout`` (0 = wait forever). ``default_job_options`` / ``default_worker_options``
    are the keyword options of ``Queue.add`` / ``Worker``. Every subscription's
    worker runs in one engine (``worker_group``, e.g. shared with a workflow provider;
    else one made here): a thousand event types cost a few threads.

    With ``default_worker_options={"processes": N}`` (and ``job_timeout``,
    ``max_jobs_per_process``, as a Worker takes them) each event type's worker runs its
    subscriber in N child processes: a subscriber must then be a function defined at a
    module's top level (it is sent by reference), and cannot be replaced once its
    worker runs. In the child, the message and its propagation context are rebuilt
    from the job; the provider itself is not there (an emit from the child needs a
    provider of the child's own).
    """

    def __init__(self, connection: Any = None, default_timeout: Seconds = DEFAULT_TIMEOUT,
                 queue_prefix: str = "event",
                 default_job_options: Optional[Mapping[str, Any]] = None,
                 default_worker_options: Optional[Mapping[str, Any]] = None, *,
                 prefix: str = "bull", metrics: Optional[QueueMetrics] = None,
                 queue_manager: Optional[QueueManager] = None,
                 completion_tracker: Optional[CompletionTracker] = None,
                 scheduled_event_manager: Optional[ScheduledEventManager] = None,
                 logger: Optional[logging.Logger] = None,
                 worker_group: Optional[WorkerGroup] = None) -> None:
        self.default_timeout: float = to_seconds(default_timeout, "default_timeout",
                                                allow_none=False) or 0.0
        self._log = logger or log
        self.queue_manager = queue_manager or QueueManager(
            connection, queue_prefix=queue_prefix, prefix=prefix, metrics=metrics,
            default_job_options=default_job_options,
            default_worker_options=default_worker_options, logger=logger,
            worker_group=worker_group)
        self.completion_tracker = completion_tracker or CompletionTracker(
            connection, default_timeout=self.default_timeout,
            prefix=self.queue_manager.prefix, logger=logger)
        self.scheduled_event_manager = scheduled_event_manager or ScheduledEventManager(
            queue_manager=self.queue_manager, logger=logger)
        # the emit futures' done-callbacks run here, in order (see CheckedFuture)
        self._callbacks = Lanes("orijs-event-callbacks")
        self._sender = Lanes("orijs-event-sender", SENDER_LANES)    # emits' adds
        self._lock = threading.Lock()   # guards _state, _handlers and _before_start
        self._state = "new"             # new -> started -> stopped
        self._handlers: Dict[str, EventHandler] = {}    # event -> its current handler
        # Calls made before start(): (run at start, fail if stopped first; None: keep).
        self._before_start: List[Tuple[Callable[[], Any],
                                       Optional[Callable[[BaseException], Any]]]] = []
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()   # its parts reset themselves

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> "BullMQEventProvider":
        """Start the events thread. Idempotent."""
        with self._lock:
            if self._state == "stopped":
                raise errors.ShutdownError("the event provider is stopped")
            if self._state == "started":
                return self
            self._state = "started"
        try:
            self.completion_tracker.start()
        except BaseException:
            with self._lock:
                self._state = "new"
            raise
        with self._lock:
            deferred, self._before_start = self._before_start, []
        for run, _ in deferred:
            try:
                run()
            except Exception:  # noqa: BLE001 - one bad registration must not stop the rest
                self._log.exception("event provider: a call made before start() failed")
        return self

    def stop(self, timeout: Optional[float] = None) -> None:
        """The sender threads first (emits not yet added fail with ``ShutdownError``), then
        workers (active handlers finish; all within ``timeout`` seconds), then the
        tracker (pending futures fail with ``ShutdownError``), then schedules, then the
        callback thread (the callbacks queued run first). Idempotent. From a done-callback
        of an emit's future, it returns once the rest is stopped; the callback thread
        ends as that callback returns."""
        emits: List[Callable[[BaseException], Any]] = []
        with self._lock:
            state = self._state
            if state == "started":
                self._state = "stopped"
            elif state == "new":           # never started: stays startable, emits fail
                emits = [fail for _, fail in self._before_start if fail is not None]
                self._before_start = [(r, f) for r, f in self._before_start if f is None]
        if state == "new":
            shutdown = errors.ShutdownError("the event provider stopped before it started")
            for fail in emits:
                fail(shutdown)
        if state != "started":
            return
        deadline = deadline_of(timeout)
        if self._sender.close(deadline):      # adds not begun fail with ShutdownError
            self._log.warning("event provider: an add still waits for Redis after %ss", timeout)
        try:
            self.queue_manager.stop(timeout=remaining(deadline))
        finally:
            try:   # outcomes the workers wrote before closing still settle their futures
                left = remaining(deadline)
                self.completion_tracker.stop(settle_timeout=5.0 if left is None else min(left, 5.0))
            finally:
                try:
                    self.scheduled_event_manager.stop()
                finally:
                    self._callbacks.close(deadline, drain=True)

    def __enter__(self) -> "BullMQEventProvider":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _refuse_if_stopped(self) -> None:
        if self._state == "stopped":
            raise errors.ShutdownError("the event provider is stopped")

    def _check_started(self) -> None:
        state = self._state
        if state == "stopped":
            raise errors.ShutdownError("the event provider is stopped")
        if state != "started":
            raise errors.InvalidStateError("the event provider is not started: call start()")

    # -- subscribe ---------------------------------------------------------
    def subscribe(self, event_name: str, handler: EventHandler) -> None:
        """Run ``handler(message)`` for each ``event_name`` event; its return value (JSON)
        is the emitter's result. Returns once the worker is ready. Subscribing again
        replaces the handler (as OriJS swaps the worker): events not yet taken by a
        handler go to the new one; in process mode, only before ``start()`` (the running
        worker's children hold the handler)."""
        validate_event_name(event_name)
        if not callable(handler):
            raise errors.InvalidArgumentType(
                "handler must be callable: handler(message) -> result")
        processes = self.queue_manager.process_mode
        if processes:
            sendable(handler, "handler")     # refused now when a child cannot get it
        with self._lock:
            self._refuse_if_stopped()
            replacing = event_name in self._handlers
            if replacing and processes and self._state == "started":
                raise errors.InvalidStateError(
                    f"event {event_name!r} already has a subscriber running in child "
                    f"processes (processes=): it cannot be replaced while the provider runs")
            self._handlers[event_name] = handler
            if self._state == "new":
                if not replacing:
                    self._before_start.append((lambda: self._start_worker(event_name), None))
                return
        if not replacing:
            self._start_worker(event_name)

    def _start_worker(self, event_name: str) -> None:
        """The event's worker, calling its current handler (ready when this returns); in
        process mode, the handler subscribed when it starts, sent to its children."""
        def process(job: Job) -> Any:
            with self._lock:
                current = self._handlers[event_name]
            return handle(current, event_name, job)

        process.__qualname__ = f"event handler {event_name}"
        processor: Callable[[Job], Any] = process
        if self.queue_manager.process_mode:
            with self._lock:
                processor = Subscriber(event_name, self._handlers[event_name])
        try:
            self.queue_manager.register_worker(event_name, processor)
        except BaseException:
            with self._lock:
                self._handlers.pop(event_name, None)     # a later subscribe starts afresh
            raise

    # -- emit --------------------------------------------------------------
    def emit(self, event_name: str, payload: Any = None,
             meta: Optional[Mapping[str, Any]] = None, *, delay: Optional[Seconds] = None,
             timeout: Optional[Seconds] = None, idempotency_key: Optional[str] = None,
             causation_id: Optional[str] = None,
             expects_result: bool = True) -> EventSubscription:
        """Enqueue an event; the returned Future settles with the handler's result.

        ``meta``/``causation_id`` default to the propagation context (inside a handler:
        its meta and its event id). ``timeout`` seconds (0 = none) defaults to
        ``default_timeout``. With ``expects_result=False`` the Future settles (with None)
        once the event is enqueued. Bad arguments raise here, before anything is written;
        Redis failures fail the Future.

        The add runs on one of the provider's sender threads (a thread's emits are added
        in the order it made them); ``emit`` waits for it at most ``timeout`` seconds,
        so it returns within its timeout whatever the network does, the Future failed
        then with ``errors.TimeoutError`` naming the event and its job id. An event whose
        Future has failed before its add began is never added; an add already sent may
        still land after the Future failed (Redis answered late): that event runs as any
        other, as does one whose handler outlived the timeout; its result goes nowhere
        (a warning is logged). Retry with the same ``idempotency_key`` to add it once.
        """
        message, delay_s, wait = self._check_emit(event_name, payload, meta, delay, timeout,
                                                  idempotency_key, causation_id, expects_result)
        queue_name = self.queue_manager.get_queue_name(event_name)
        sub = EventSubscription(event_name, message.event_id, message.correlation_id,
                                message.job_id, queue_name=queue_name,
                                canceller=self._cancel_subscription,
                                callbacks=self._callbacks)

        def send() -> "_Signal":
            return self._dispatch(sub, message, delay_s, wait, idempotency_key,
                                  expects_result)

        with self._lock:
            self._refuse_if_stopped()
            if self._state == "new":
                self._before_start.append((send, sub._reject))
                return sub
        send().wait(wait or None)      # the add, for at most the emit's timeout
        return sub

    def _check_emit(self, event_name: str, payload: Any, meta: Optional[Mapping[str, Any]],
                    delay: Optional[Seconds], timeout: Optional[Seconds],
                    idempotency_key: Optional[str], causation_id: Optional[str],
                    expects_result: bool) -> Tuple[EventMessage, Optional[float], float]:
        """``emit``'s arguments checked (nothing written): the message it sends (meta and
        causation id resolved from the propagation context now), the delay and the wait."""
        check.boolean(expects_result, "expects_result")
        meta, causation_id = context.resolve(meta, causation_id)
        message = EventMessage.create(event_name, payload, meta, causation_id=causation_id,
                                      idempotency_key=idempotency_key)
        delay_s = to_seconds(delay, "delay")
        wait = self.default_timeout if timeout is None else to_seconds(timeout, "timeout")
        return message, delay_s, wait or 0.0

    def _dispatch(self, sub: EventSubscription, message: EventMessage,
                  delay_s: Optional[float], wait: Optional[float],
                  idempotency_key: Optional[str], expects_result: bool) -> "_Signal":
        """On the caller's thread: register the wait (its timeout counts from now) and
        hand the add to a sender thread. Returns what is set once the add is done."""
        sent = _Signal()
        queue_name, corr = sub.queue_name or "", message.correlation_id
        try:
            self.completion_tracker.register(queue_name, corr, sub._resolve, sub._reject,
                                             timeout=wait, on_cancel=sub._cancel_local,
                                             label=f"event {sub.event_name!r}",
                                             job_id=sub.job_id, watch=False)
        except errors.OrijsError as exc:
            sub._reject(exc)
            sent.set()
            return sent

        def add() -> None:
            try:
                self._send(sub, message, delay_s, idempotency_key, expects_result)
            finally:
                sent.set()

        def drop() -> None:
            self.completion_tracker.fail(queue_name, corr, errors.ShutdownError(
                f"the event provider stopped before event {sub.event_name!r} "
                f"(job {sub.job_id}) was added"))
            sent.set()

        if not self._sender.submit(add, on_drop=drop):
            drop()
        return sent

    def _send(self, sub: EventSubscription, message: EventMessage, delay_s: Optional[float],
              idempotency_key: Optional[str], expects_result: bool) -> None:
        """On a sender thread: enqueue an emitted event and track its outcome; failures
        go to ``sub``. Not added when its wait is over already (timed out, stopped)."""
        event_name, queue_name, job_id = sub.event_name, sub.queue_name or "", sub.job_id
        corr, tracker = message.correlation_id, self.completion_tracker
        if not tracker.is_pending(queue_name, corr):
            return
        try:
            if expects_result:
                tracker.watch(queue_name)    # before the add: no outcome is missed
            job = self.queue_manager.add_job(event_name, message.to_dict(), name=EVENT_JOB_NAME,
                                             job_id=job_id, delay=delay_s or None)
        except Exception as exc:  # noqa: BLE001 - the Future carries it
            tracker.fail(queue_name, corr, exc)
            return
        if not expects_result:
            if not tracker.is_pending(queue_name, corr):
                self._added_late(sub)
            tracker.complete(queue_name, corr, None)
            return
        if not tracker.map_job_id(queue_name, job.id, corr):
            self._added_late(sub)
        elif idempotency_key is not None:
            self._settle_if_finished(event_name, queue_name, job.id, corr)

    def _added_late(self, sub: EventSubscription) -> None:
        self._log.warning("event %r (job %s) was added after its emit had ended (timed "
                          "out, cancelled or stopped): it runs; its result goes nowhere",
                          sub.event_name, sub.job_id)

    def _settle_if_finished(self, event_name: str, queue_name: str, job_id: str,
                            corr: str) -> None:
        """A duplicate idempotency key may name a job that finished long ago: its events
        are gone, so read the outcome from Redis (after mapping, so nothing is missed)."""
        try:
            queue = self.queue_manager.get_queue(event_name)
            state = queue.get_job_state(job_id)
            if state not in ("completed", "failed"):
                return
            job = queue.get_job(job_id)
        except Exception as exc:  # noqa: BLE001
            self.completion_tracker.fail(queue_name, corr, exc)
            return
        if job is None:
            return
        if state == "completed":
            self.completion_tracker.complete(queue_name, corr, job.returnvalue)
        else:
            self.completion_tracker.fail(queue_name, corr,
                                         errors.JobFailed(job.failed_reason or "", job_id))

    # -- cancel ------------------------------------------------------------
    def cancel(self, event_name: str, key: str) -> bool:
        """Remove a pending (delayed or waiting) event; ``key`` is its idempotency key or,
        without one, its event id. False if it is unknown or a handler has taken it."""
        validate_event_name(event_name)
        check.job_id(key, "key")
        self._check_started()
        queue = self.queue_manager.get_queue(event_name)
        return self.completion_tracker.remove_job(   # atomic: never a job a handler took
            queue.name, key, lambda: queue.remove(key, states=PENDING_STATES))

    def _cancel_subscription(self, sub: EventSubscription) -> bool:
        try:
            return self.cancel(sub.event_name, sub.job_id)
        except errors.OrijsError:
            return False

    # -- schedules ---------------------------------------------------------
    def schedule_event(self, event_name: str, *, schedule_id: str, cron: Optional[str] = None,
                       every: Optional[Seconds] = None, payload: Any = None,
                       meta: Optional[Mapping[str, Any]] = None) -> ScheduleInfo:
        """A recurring event (cron with 5-6 fields, or every N seconds); created or replaced.
        Before ``start()``: checked now, added at start."""
        validate_event_name(event_name)
        seconds = validate_schedule(schedule_id, cron, every)

        def schedule() -> ScheduleInfo:
            return self.scheduled_event_manager.schedule(event_name, schedule_id, cron=cron,
                                                         every=every, payload=payload,
                                                         meta=meta)

        with self._lock:
            self._refuse_if_stopped()
            if self._state == "new":
                self._before_start.append((schedule, None))
                message = EventMessage.create(event_name, payload, meta)
                return ScheduleInfo(event_name, schedule_id,
                                    self.queue_manager.get_queue_name(event_name), cron=cron,
                                    every=seconds, payload=payload, meta=dict(message.meta))
        return schedule()

    def unschedule_event(self, event_name: str, schedule_id: str) -> bool:
        validate_event_name(event_name)
        check.string(schedule_id, "schedule_id")
        self._check_started()
        return self.scheduled_event_manager.unschedule(event_name, schedule_id)

    # -- introspection -----------------------------------------------------
    def stats(self) -> Dict[str, int]:
        """Sizes of every internal map (all zero once nothing is pending)."""
        sizes = dict(self.completion_tracker.sizes())
        sizes.update({f"qm_{k}": v for k, v in self.queue_manager.sizes().items()
                      if k == "job_start_times"})
        return sizes


class _Signal:
    """Set once, waited for by one thread: a bare lock (no Condition to hand back and
    forth on the emit's hot path)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        if self._lock.locked():
            try:
                self._lock.release()
            except RuntimeError:      # set twice at once: already released
                pass

    def wait(self, timeout: Optional[float] = None) -> bool:
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            return False
        self._lock.release()          # stays set for any later wait
        return True
