"""InProcessEventProvider: the BullMQEventProvider interface with no Redis.

For unit tests and single-process use. Same Futures, same outcomes: handlers
run on a thread pool per event type (concurrency 10 by default), events wait
for a subscriber, retries follow the merged job options (3 attempts, exponential
backoff from 1 s by default), data and results go through JSON as they would in
Redis, failures arrive as ``JobFailed``. One timer thread serves delays,
retries, timeouts and schedules.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Deque, Dict, List, Mapping, Optional, Tuple

from .. import errors
from ..base import validate as check
from ..base.pools import deadline_of, shutdown_pools
from ..base.timer import Timer, TimerHandle
from ..base.util import Seconds, dumps, now_ms, run_logged, to_seconds
from ..job_scheduler import cron_next_millis
from ..waits.futures import no_result
from . import context
from .completion_tracker import DEFAULT_TIMEOUT
from .message import EventMessage, validate_event_name
from .provider import EventHandler
from .queue_manager import (
    DEFAULT_CONCURRENCY,
    QueueMetrics,
    RetryOptions,
    call_metric,
    check_default_job_options,
    check_worker_options,
    merge_job_options,
    refuse_processes,
)
from .scheduled import ScheduleInfo, validate_schedule
from .subscription import EventSubscription

log = logging.getLogger(__name__)

__all__ = ["InProcessEventProvider"]


class _Job:
    __slots__ = ("id", "event_name", "data", "attempts", "backoff", "attempts_made", "state",
                 "waiters", "timer", "keyed")

    def __init__(self, job_id: str, event_name: str, data: Dict[str, Any], attempts: int,
                 backoff: Optional[Mapping[str, Any]], keyed: bool) -> None:
        self.id = job_id
        self.event_name = event_name
        self.data = data
        self.attempts = attempts
        self.backoff = backoff
        self.attempts_made = 0
        self.state = "waiting"
        self.waiters: List[Tuple[EventSubscription, Optional[TimerHandle]]] = []
        self.timer: Optional[TimerHandle] = None
        self.keyed = keyed


class _Schedule:
    __slots__ = ("info", "data", "timer")

    def __init__(self, info: ScheduleInfo, data: Dict[str, Any]) -> None:
        self.info = info
        self.data = data
        self.timer: Optional[TimerHandle] = None


def _backoff_seconds(backoff: Optional[Mapping[str, Any]], attempts_made: int) -> float:
    if not backoff:
        return 0.0
    delay = float(to_seconds(backoff.get("delay") or 0, "backoff delay") or 0.0)
    if backoff.get("type") == "exponential":
        return float((2 ** (attempts_made - 1)) * delay)
    return delay


class InProcessEventProvider:
    """Events inside one process: ``emit`` / ``subscribe`` / schedules, no Redis."""

    def __init__(self, default_timeout: Seconds = DEFAULT_TIMEOUT,
                 default_job_options: Optional[Mapping[str, Any]] = None,
                 default_worker_options: Optional[Mapping[str, Any]] = None, *,
                 metrics: Optional[QueueMetrics] = None, max_finished_jobs: int = 10_000,
                 logger: Optional[logging.Logger] = None) -> None:
        self.default_timeout: float = to_seconds(default_timeout, "default_timeout",
                                                allow_none=False) or 0.0
        self._retry = RetryOptions()
        self.default_job_options = check_default_job_options(self._retry, default_job_options)
        worker_options = check_worker_options(default_worker_options)
        refuse_processes(worker_options, "the in-process provider runs its handlers on its "
                         "own threads, with no Redis to carry a job to a child process")
        self.concurrency = int(worker_options.get("concurrency", DEFAULT_CONCURRENCY))
        self.metrics = metrics
        self.max_finished_jobs = check.integer(max_finished_jobs, "max_finished_jobs", minimum=0)
        self._log = logger or log
        self._timer = Timer("orijs-inprocess-timer")
        self._lock = threading.Lock()   # guards every map below and _state
        self._handlers: Dict[str, Tuple[EventHandler, ThreadPoolExecutor]] = {}
        self._waiting: Dict[str, Deque[_Job]] = {}           # event -> jobs with no subscriber
        self._jobs: Dict[str, Dict[str, _Job]] = {}          # event -> job id -> unfinished job
        self._finished: "OrderedDict[Tuple[str, str], Tuple[bool, Any]]" = OrderedDict()
        self._schedules: Dict[Tuple[str, str], _Schedule] = {}
        self._state = "new"

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> "InProcessEventProvider":
        """Subscriptions, schedules and emits made before start() take effect now."""
        with self._lock:
            if self._state == "stopped":
                raise errors.ShutdownError("the event provider is stopped")
            if self._state == "new":
                self._timer.start()
                self._state = "started"
                for event_name in list(self._waiting):       # parked before start
                    entry = self._handlers.get(event_name)
                    if entry is not None:
                        for job in self._waiting.pop(event_name):
                            entry[1].submit(self._run, job)
        return self

    def stop(self, timeout: Optional[float] = None) -> None:
        """Handlers first (running ones finish, waited for up to ``timeout`` seconds; past
        it a warning names the events whose handlers still run), then pending futures
        fail with ``ShutdownError``, then schedules and the timer thread. Idempotent. A provider stopped
        before it started fails its parked emits and stays startable."""
        deadline = deadline_of(timeout)
        with self._lock:
            state = self._state
            if state == "new":              # never started: its emits fail, it stays startable
                waiters = self._drop_jobs()
            elif state == "started":
                self._state = "stopped"
                executors = {name: executor for name, (_, executor) in self._handlers.items()}
                self._handlers.clear()
        if state == "new":
            _fail(waiters, errors.ShutdownError("the event provider stopped before it started"))
        if state != "started":
            return
        busy = shutdown_pools(executors, deadline)
        if busy:
            self._log.warning("InProcessEventProvider stopped after %ss with handlers still "
                              "running for: %s", timeout, ", ".join(busy))
        with self._lock:
            waiters = self._drop_jobs()
            self._finished.clear()
            self._schedules.clear()
        self._timer.stop()
        _fail(waiters, errors.ShutdownError("InProcessEventProvider shutting down"))

    def _drop_jobs(self) -> List[EventSubscription]:
        """Forget every unfinished job (lock held); returns their waiting futures."""
        waiters: List[EventSubscription] = []
        for job in [job for jobs in self._jobs.values() for job in jobs.values()]:
            self._timer.cancel(job.timer)
            for sub, handle in job.waiters:
                self._timer.cancel(handle)
                waiters.append(sub)
        self._jobs.clear()
        self._waiting.clear()
        return waiters

    def __enter__(self) -> "InProcessEventProvider":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _refuse_if_stopped(self) -> None:
        if self._state == "stopped":
            raise errors.ShutdownError("the event provider is stopped")

    def _check_started(self) -> None:
        if self._state == "stopped":
            raise errors.ShutdownError("the event provider is stopped")
        if self._state != "started":
            raise errors.InvalidStateError("the event provider is not started: call start()")

    # -- subscribe ---------------------------------------------------------
    def subscribe(self, event_name: str, handler: EventHandler) -> None:
        validate_event_name(event_name)
        if not callable(handler):
            raise errors.InvalidArgumentType(
                "handler must be callable: handler(message) -> result")
        with self._lock:
            self._refuse_if_stopped()             # before start(): takes effect at start
            if event_name in self._handlers:      # OriJS swaps the worker: replace
                self._handlers[event_name] = (handler, self._handlers[event_name][1])
                return
            executor = ThreadPoolExecutor(self.concurrency,
                                          thread_name_prefix=f"orijs-inprocess-{event_name}")
            self._handlers[event_name] = (handler, executor)
            if self._state == "started":
                for job in self._waiting.pop(event_name, ()):
                    executor.submit(run_logged, log, self._run, job)

    # -- emit --------------------------------------------------------------
    def emit(self, event_name: str, payload: Any = None,
             meta: Optional[Mapping[str, Any]] = None, *, delay: Optional[Seconds] = None,
             timeout: Optional[Seconds] = None, idempotency_key: Optional[str] = None,
             causation_id: Optional[str] = None,
             expects_result: bool = True) -> EventSubscription:
        check.boolean(expects_result, "expects_result")
        meta, causation_id = context.resolve(meta, causation_id)
        message = EventMessage.create(event_name, payload, meta, causation_id=causation_id,
                                      idempotency_key=idempotency_key)
        delay_s = to_seconds(delay, "delay") or 0.0
        wait = self.default_timeout if timeout is None else to_seconds(timeout, "timeout")
        options = merge_job_options(self._retry, self.default_job_options, {})
        attempts = max(int(options.get("attempts") or 1), 1)
        data = json.loads(message.to_json())
        job_id = message.job_id
        sub = EventSubscription(event_name, message.event_id, message.correlation_id, job_id,
                                queue_name=event_name, canceller=self._cancel_subscription)
        with self._lock:
            self._refuse_if_stopped()             # before start(): parked until start
            jobs = self._jobs.setdefault(event_name, {})
            job = jobs.get(job_id)
            finished = self._finished.get((event_name, job_id)) if job is None else None
            added = job is None and finished is None
            if added:
                job = _Job(job_id, event_name, data, attempts, options.get("backoff"),
                           idempotency_key is not None)
                jobs[job_id] = job
                if delay_s > 0:
                    job.state = "delayed"
                    job.timer = self._timer.call_later(delay_s, lambda: self._promote(job))
                else:
                    self._ready(job)
            elif not jobs:
                del self._jobs[event_name]
            if expects_result and job is not None:
                handle = (self._timer.call_later(wait, lambda: self._time_out(job, sub, wait))
                          if wait else None)
                job.waiters.append((sub, handle))
        if added:
            call_metric(self.metrics, "on_job_added", event_name, job_id)
        if not expects_result:
            sub._resolve(None)
        elif finished is not None:
            ok, value = finished
            sub._resolve(value) if ok else sub._reject(errors.JobFailed(value, job_id))
        return sub

    def _ready(self, job: _Job) -> None:
        """The job can run: hand it to the subscriber, or park it (lock held)."""
        job.state = "waiting"
        job.timer = None
        entry = self._handlers.get(job.event_name)
        if entry is not None and self._state == "started":
            entry[1].submit(run_logged, log, self._run, job)
        else:
            self._waiting.setdefault(job.event_name, deque()).append(job)

    def _promote(self, job: _Job) -> None:
        with self._lock:
            if self._jobs.get(job.event_name, {}).get(job.id) is job and job.state == "delayed":
                self._ready(job)

    def _time_out(self, job: _Job, sub: EventSubscription, seconds: float) -> None:
        with self._lock:
            job.waiters = [(s, h) for s, h in job.waiters if s is not sub]
        sub._reject(no_result(f"event {job.event_name!r}", job.id, seconds))

    # -- running -----------------------------------------------------------
    def _run(self, job: _Job) -> None:
        with self._lock:
            entry = self._handlers.get(job.event_name)
            if (entry is None or job.state != "waiting"
                    or self._jobs.get(job.event_name, {}).get(job.id) is not job):
                return
            job.state = "active"
        handler = entry[0]
        started = time.monotonic()
        try:
            message = EventMessage.from_dict(job.data)
            with context.handling(message):
                result = handler(message)
            try:
                result = json.loads(dumps(result, f"return value of job {job.id}"))
            except TypeError as exc:
                raise errors.UnrecoverableError(str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - handler errors become the job's failure
            self._failed(job, exc, time.monotonic() - started)
        else:
            duration = time.monotonic() - started
            self._finish(job, True, result)
            call_metric(self.metrics, "on_job_completed", job.event_name, job.id, duration)

    def _failed(self, job: _Job, exc: BaseException, duration: float) -> None:
        job.attempts_made += 1
        call_metric(self.metrics, "on_job_failed", job.event_name, job.id, exc)
        if job.attempts_made < job.attempts and not isinstance(exc, errors.UnrecoverableError):
            with self._lock:
                if self._state == "started":
                    job.state = "delayed"
                    delay = _backoff_seconds(job.backoff, job.attempts_made)
                    job.timer = self._timer.call_later(delay, lambda: self._promote(job))
                    return
        self._finish(job, False, str(exc) or type(exc).__name__)

    def _finish(self, job: _Job, ok: bool, value: Any) -> None:
        with self._lock:
            jobs = self._jobs.get(job.event_name, {})
            if jobs.get(job.id) is job:
                del jobs[job.id]
                if not jobs:
                    del self._jobs[job.event_name]
            job.state = "completed" if ok else "failed"
            waiters, job.waiters = job.waiters, []
            for _, handle in waiters:
                self._timer.cancel(handle)
            if job.keyed and self._state == "started":
                self._finished[(job.event_name, job.id)] = (ok, value)
                while len(self._finished) > self.max_finished_jobs:
                    self._finished.popitem(last=False)
        for sub, _ in waiters:
            if ok:
                sub._resolve(value)
            else:
                sub._reject(errors.JobFailed(value, job.id))

    # -- cancel ------------------------------------------------------------
    def cancel(self, event_name: str, key: str) -> bool:
        """Remove a delayed or waiting event; False if unknown or already taken."""
        validate_event_name(event_name)
        check.job_id(key, "key")
        with self._lock:
            self._check_started()
            jobs = self._jobs.get(event_name, {})
            job = jobs.get(key)
            if job is None or job.state not in ("delayed", "waiting"):
                return False
            del jobs[key]
            if not jobs:
                del self._jobs[event_name]
            self._timer.cancel(job.timer)
            parked = self._waiting.get(event_name)
            if parked is not None and job in parked:
                parked.remove(job)
                if not parked:
                    del self._waiting[event_name]
            job.state = "removed"
            waiters, job.waiters = job.waiters, []
            for _, handle in waiters:
                self._timer.cancel(handle)
        for sub, _ in waiters:
            sub._cancel_local()
        return True

    def _cancel_subscription(self, sub: EventSubscription) -> bool:
        try:
            return self.cancel(sub.event_name, sub.job_id)
        except errors.OrijsError:
            return False

    # -- schedules ---------------------------------------------------------
    def schedule_event(self, event_name: str, *, schedule_id: str, cron: Optional[str] = None,
                       every: Optional[Seconds] = None, payload: Any = None,
                       meta: Optional[Mapping[str, Any]] = None) -> ScheduleInfo:
        validate_event_name(event_name)
        seconds = validate_schedule(schedule_id, cron, every)
        message = EventMessage.create(event_name, payload, meta)
        # As BullMQ's job schedulers: an "every" series runs at once, cron at its next time.
        now = now_ms()
        next_run = now if cron is None else _cron_next(cron, now)
        info = ScheduleInfo(event_name, schedule_id, event_name, cron=cron, every=seconds,
                            payload=payload, meta=dict(message.meta), next_run=next_run)
        entry = _Schedule(info, json.loads(message.to_json()))
        with self._lock:
            self._refuse_if_stopped()             # before start(): fires once started
            old = self._schedules.pop((event_name, schedule_id), None)
            if old is not None:
                self._timer.cancel(old.timer)
            self._schedules[(event_name, schedule_id)] = entry
            first = max(next_run - now_ms(), 0) / 1000.0
            entry.timer = self._timer.call_later(first, lambda: self._fire(entry))
        return info

    @staticmethod
    def _next_delay(info: ScheduleInfo) -> float:
        if info.every is not None:
            return info.every
        assert info.cron is not None
        now = now_ms()
        return max(_cron_next(info.cron, now) - now, 0) / 1000.0

    def _fire(self, entry: _Schedule) -> None:
        info = entry.info
        with self._lock:
            if self._schedules.get((info.event_name, info.schedule_id)) is not entry:
                return
            job_id = f"repeat:{info.schedule_id}:{int(time.time() * 1000)}"
            options = merge_job_options(self._retry, self.default_job_options, {})
            job = _Job(job_id, info.event_name, entry.data,
                       max(int(options.get("attempts") or 1), 1), options.get("backoff"), False)
            self._jobs.setdefault(info.event_name, {})[job_id] = job
            self._ready(job)
            entry.timer = self._timer.call_later(self._next_delay(info), lambda: self._fire(entry))
        call_metric(self.metrics, "on_job_added", info.event_name, job_id)

    def unschedule_event(self, event_name: str, schedule_id: str) -> bool:
        validate_event_name(event_name)
        check.string(schedule_id, "schedule_id")
        with self._lock:
            self._check_started()
            entry = self._schedules.pop((event_name, schedule_id), None)
            if entry is None:
                return False
            self._timer.cancel(entry.timer)
        return True

    # -- introspection -----------------------------------------------------
    def stats(self) -> Dict[str, int]:
        """Sizes of every internal map (all zero once nothing is pending; finished
        idempotency records are kept, up to ``max_finished_jobs``, as Redis keeps jobs)."""
        with self._lock:
            sizes = {"pending": sum(len(j.waiters) for js in self._jobs.values()
                                    for j in js.values()),
                     "jobs": sum(len(js) for js in self._jobs.values()),
                     "parked": sum(len(q) for q in self._waiting.values()),
                     "idempotency_records": len(self._finished)}
        sizes["timers"] = self._timer.heap_size
        return sizes


def _fail(subs: List[EventSubscription], exc: BaseException) -> None:
    for sub in subs:
        sub._reject(exc)


def _cron_next(pattern: str, after_ms: int) -> int:
    """The next run of a cron schedule, read as the job schedulers (and BullMQ) read it."""
    millis = cron_next_millis(pattern, after_ms)
    assert millis is not None    # no end date here
    return millis
