"""QueueManager: one BullMQ queue (and at most one worker) per event type.

Queue names are ``{queue_prefix}.{event_name}`` (``event.order.created``). Job
options are merged, lowest precedence first: the default retry (3 attempts,
exponential backoff from 1 s), ``default_job_options``, then the per-call options.
"""
from __future__ import annotations

import inspect
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple, Type, Union

from .. import errors
from .. import options as job_options
from .._processes import process_options
from ..base import fork
from ..base import validate as check
from ..base.pools import deadline_of, remaining
from ..job import Job
from ..queue import Queue
from ..store.connect import as_connection
from ..worker import Worker
from ..worker_group import SharedGroup, WorkerGroup
from .message import validate_event_name

log = logging.getLogger(__name__)

__all__ = ["QueueManager", "QueueMetrics", "RetryOptions", "DEFAULT_CONCURRENCY"]

DEFAULT_CONCURRENCY = 10
_PENDING = object()   # placeholder in the workers map while a worker starts


@dataclass(frozen=True)
class RetryOptions:
    """The retry policy every event job gets unless the options say otherwise."""

    attempts: int = 3
    backoff_type: str = "exponential"
    backoff_delay: float = 1.0   # seconds (1000 ms in Redis)

    def as_job_options(self) -> Dict[str, Any]:
        return {"attempts": self.attempts,
                "backoff": {"type": self.backoff_type, "delay": self.backoff_delay}}


class QueueMetrics(Protocol):
    """Optional hooks; implement any subset (missing methods are skipped)."""

    def on_job_added(self, event_name: str, job_id: str) -> None: ...
    def on_job_completed(self, event_name: str, job_id: str, duration: float) -> None: ...
    def on_job_failed(self, event_name: str, job_id: str, error: BaseException) -> None: ...


def call_metric(metrics: Any, hook: str, *args: Any) -> None:
    fn = getattr(metrics, hook, None) if metrics is not None else None
    if fn is None:
        return
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - metrics must never break event delivery
        log.exception("metrics hook %s failed", hook)


def merge_job_options(retry: RetryOptions, defaults: Optional[Mapping[str, Any]],
                      options: Mapping[str, Any]) -> Dict[str, Any]:
    merged = retry.as_job_options()
    merged.update(defaults or {})
    merged.update({k: v for k, v in options.items() if v is not None})
    return merged


WORKER_OPTIONS = tuple(p.name for p in inspect.signature(Worker.__init__).parameters.values()
                       if p.kind is p.KEYWORD_ONLY and p.name not in ("prefix", "group"))
PROCESS_OPTIONS = ("processes", "job_timeout", "max_jobs_per_process")


def check_default_job_options(retry: RetryOptions,
                              options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``default_job_options`` as given, refused (naming the key) unless every option is
    one ``Queue.add`` takes, with a valid value."""
    options = check.mapping(options, "default_job_options")
    check.known_keys(options, job_options.KNOWN, "default_job_options")
    job_options.encode(merge_job_options(retry, options, {}), arg="default_job_options")
    return options


def check_worker_options(options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``default_worker_options``: keywords of ``Worker``; ``concurrency`` and the process
    mode's (``processes``, ``job_timeout``, ``max_jobs_per_process``) are checked here,
    the others when the worker starts."""
    options = check.mapping(options, "default_worker_options")
    check.known_keys(options, WORKER_OPTIONS, "default_worker_options")
    if "concurrency" in options:
        check.integer(options["concurrency"], "default_worker_options.concurrency", minimum=1,
                      maximum=10_000)
    process_options(options.get("processes"), options.get("concurrency"),
                    options.get("job_timeout"), options.get("max_jobs_per_process"))
    return options


def refuse_processes(options: Mapping[str, Any], why: str) -> None:
    """For a provider whose handlers cannot run in a child process: its process options
    are refused, saying ``why``, rather than ignored."""
    for key in PROCESS_OPTIONS:
        if options.get(key) is not None:
            check.bad_value(f"default_worker_options.{key}", options[key],
                            f"is not for this provider: {why}")


class QueueManager:
    """Per-event-type queues and workers (``QueueClass``/``WorkerClass`` injectable).
    The workers share one engine (``worker_group``, else one made here): subscribing
    to a thousand event types costs a few threads and connections, not thousands."""

    def __init__(self, connection: Any = None, *, queue_prefix: str = "event",
                 prefix: str = "bull", metrics: Optional[QueueMetrics] = None,
                 default_retry: Optional[RetryOptions] = None,
                 default_job_options: Optional[Mapping[str, Any]] = None,
                 default_worker_options: Optional[Mapping[str, Any]] = None,
                 queue_class: Type[Queue] = Queue, worker_class: Type[Worker] = Worker,
                 logger: Optional[logging.Logger] = None,
                 worker_group: Optional[WorkerGroup] = None) -> None:
        self.queue_prefix = check.name(queue_prefix, "queue_prefix")
        self.prefix = check.string(prefix, "prefix")
        self.default_retry = default_retry or RetryOptions()
        self.default_job_options = check_default_job_options(self.default_retry,
                                                             default_job_options)
        self.default_worker_options = check_worker_options(default_worker_options)
        # one RedisConnection (one pool) for every queue and worker, however many types
        self.connection = as_connection(connection)
        self._owns_connection = self.connection is not connection
        self._group = SharedGroup(worker_group, self.connection, "events")
        self.metrics = metrics
        self._queue_class = queue_class
        self._worker_class = worker_class
        self._log = logger or log
        self._lock = threading.Lock()   # guards _queues, _workers, _started_at, _stopped
        self._queues: Dict[str, Queue] = {}
        self._workers: Dict[str, Union[Worker, object]] = {}
        self._started_at: Dict[Tuple[str, str], float] = {}
        self._stopped = False
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The parent's workers stay the parent's (inert copies here): forgotten, so
        ``stop()`` here leaves them alone and this process may subscribe on its own."""
        self._lock = threading.Lock()
        self._workers = {}
        self._started_at = {}

    # -- names and queues --------------------------------------------------
    def get_queue_name(self, event_name: str) -> str:
        return f"{self.queue_prefix}.{event_name}"

    def get_queue(self, event_name: str) -> Queue:
        """The event type's queue, created on first use and cached."""
        with self._lock:
            if self._stopped:
                raise errors.ShutdownError("QueueManager is stopped")
            queue = self._queues.get(event_name)
            if queue is None:
                queue = self._queue_class(self.get_queue_name(event_name),
                                          connection=self.connection, prefix=self.prefix)
                self._queues[event_name] = queue
            return queue

    def job_options(self, **options: Any) -> Dict[str, Any]:
        """Default retry < default_job_options < ``options`` (None values dropped)."""
        return merge_job_options(self.default_retry, self.default_job_options, options)

    def add_job(self, event_name: str, data: Any, *, name: str = "event",
                **options: Any) -> Job:
        """Add a job with the merged options; returns the Job (the existing one for a
        duplicate job id)."""
        validate_event_name(event_name)
        queue = self.get_queue(event_name)
        job = queue.add(name, data, **self.job_options(**options))
        call_metric(self.metrics, "on_job_added", event_name, job.id)
        return job

    # -- workers -----------------------------------------------------------
    @property
    def process_mode(self) -> bool:
        """Do the workers run their handlers in child processes (``processes``)?"""
        return self.default_worker_options.get("processes") is not None

    def has_worker(self, event_name: str) -> bool:
        with self._lock:
            return event_name in self._workers

    def register_worker(self, event_name: str, handler: Callable[[Job], Any]) -> Worker:
        """Start a worker on the event's queue; returns once it is ready (fetching)."""
        with self._lock:
            if self._stopped:
                raise errors.ShutdownError("QueueManager is stopped")
            if event_name in self._workers:
                raise errors.InvalidArgument(
                    f"{event_name!r} already has a subscriber in this provider")
            self._workers[event_name] = _PENDING
        try:
            base = {} if self.process_mode else {"concurrency": DEFAULT_CONCURRENCY}
            options = {**base, **self.default_worker_options,       # processes: as many
                       **self._group.options(self._worker_class)}   # threads by default
            worker = self._worker_class(self.get_queue_name(event_name), handler,
                                        prefix=self.prefix, **options)
            worker.on("active", lambda job: self._job_started(event_name, job))
            worker.on("completed", lambda job, result: self._job_completed(event_name, job))
            worker.on("failed", lambda job, exc: self._job_failed(event_name, job, exc))
            worker.on("error", lambda exc: self._log.error("worker of %s: %s", event_name, exc))
            worker.start()
        except BaseException:
            with self._lock:
                self._workers.pop(event_name, None)
            raise
        with self._lock:
            stopped = self._stopped
            if not stopped:
                self._workers[event_name] = worker
        if stopped:   # stop() ran while the worker started: it is ours to close
            worker.close()
            raise errors.ShutdownError("QueueManager stopped while the worker started")
        return worker

    def _job_started(self, event_name: str, job: Job) -> None:
        if self.metrics is None:     # durations are for the metrics hooks alone
            return
        with self._lock:
            self._started_at[(event_name, job.id)] = time.monotonic()

    def _duration(self, event_name: str, job: Job) -> float:
        if not self._started_at:     # (a hint: nothing was timed, nothing to drop)
            return 0.0
        with self._lock:
            started = self._started_at.pop((event_name, job.id), None)
        return time.monotonic() - started if started is not None else 0.0

    def _job_completed(self, event_name: str, job: Job) -> None:
        duration = self._duration(event_name, job)
        call_metric(self.metrics, "on_job_completed", event_name, job.id, duration)

    def _job_failed(self, event_name: str, job: Optional[Job], exc: BaseException) -> None:
        if job is None:
            return
        self._duration(event_name, job)
        call_metric(self.metrics, "on_job_failed", event_name, job.id, exc)

    # -- shutdown ----------------------------------------------------------
    def stop(self, timeout: Optional[float] = None) -> None:
        """Close every worker created here, of whatever ``worker_class`` (active jobs
        finish, all within ``timeout`` seconds), then the queues. Idempotent."""
        deadline = deadline_of(timeout)
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            workers: List[Any] = [w for w in self._workers.values() if w is not _PENDING]
            queues = list(self._queues.values())
            self._workers.clear()
            self._queues.clear()
        for worker in workers:
            try:
                if worker.close(timeout=remaining(deadline)) is False:
                    self._log.warning("worker %s still had active jobs after %ss",
                                      getattr(worker, "name", worker), timeout)
            except Exception:  # noqa: BLE001 - close the others anyway
                self._log.exception("closing worker %r failed", worker)
        for queue in queues:
            try:
                queue.close()
            except Exception:  # noqa: BLE001
                self._log.exception("closing queue %r failed", queue)
        with self._lock:
            self._started_at.clear()
        self._group.close(timeout=remaining(deadline))
        if self._owns_connection:
            self.connection.close()

    def sizes(self) -> Dict[str, int]:
        with self._lock:
            return {"queues": len(self._queues), "workers": len(self._workers),
                    "job_start_times": len(self._started_at)}
