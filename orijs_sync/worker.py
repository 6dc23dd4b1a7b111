"""Worker: a fetch thread, a pool of ``concurrency`` handler threads, one lock
renewer and one stalled-jobs checker, all owned, stopped and joined by ``close()``.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import _fork, errors
from . import _validate as check
from . import options as job_options
from ._futures import wait_timeout
from ._locks import LockRenewer, lock_retry_interval
from ._processing import BackoffStrategy, JobRunner, Outcome
from ._roles import Periodic, Role, backoff_delay, run_until_signalled
from ._routing import ProcessorLike, as_processor
from ._util import Seconds, dumps, now_ms
from ._workers_list import worker_client_name
from .connection import ConnectionLike, as_connection
from .job import Job
from .keys import QueueKeys
from .metrics import max_data_points
from .queue import Queue

log = logging.getLogger(__name__)

Processor = Callable[[Job], Any]
MAX_BLOCK = 3600.0   # longest block on the marker key
_handling = threading.local()    # .worker: the Worker whose handler this thread runs
LISTENER_EVENTS = ("active", "completed", "failed", "error", "stalled", "drained", "closed")


class _Fetcher(Role):
    """Moves jobs to active while slots are free; otherwise blocks on the marker key."""

    name = "fetcher"

    def __init__(self, worker: "Worker") -> None:
        super().__init__(worker._fetch_stop)
        self.w = worker
        self.blocking = worker.connection.blocking_client(worker.drain_delay,
                                                          worker.client_name)
        try:   # connect now: the named connection lists the worker (getWorkers) at once
            self.blocking.client.ping()
        except errors.OrijsError:
            log.debug("worker %s: blocking connection not opened yet", worker.name)
        self._drained = False    # "drained" is emitted once per emptying of the queue

    def loop(self) -> None:
        taken = self.w._take_slots()
        if not taken:
            return
        try:
            jobs, ttl, next_delayed = self.w._move_to_active(taken)
        except BaseException:
            self.w._give_back_slots(taken)   # never lose a slot: the role retries after a pause
            raise
        self.w._give_back_slots(taken - len(jobs))
        for job in jobs:
            self.w._dispatch(job)
        if jobs:
            self._drained = False
            return
        if not self._drained and not ttl:
            self._drained = True
            self.w._emit("drained")
        if ttl > 0:
            self.stop_event.wait(ttl / 1000.0)
            return
        self._wait_for_marker(next_delayed)

    def _wait_for_marker(self, next_delayed: int) -> None:
        timeout = self.w.drain_delay
        if next_delayed:
            timeout = min(timeout, max((next_delayed - now_ms()) / 1000.0, 0.0))
        if timeout <= 0.001 or self.stop_event.is_set():
            return
        self.blocking.client.bzpopmin(self.w.keys.marker, timeout=max(timeout, 0.01))

    def interrupt(self) -> None:
        self.blocking.interrupt()


class _Finisher(Role):
    """Writes finished jobs' outcomes many per script call, and hands the next jobs
    that call took to the pool. Outcomes wait here, never in a handler thread."""

    name = "finisher"
    max_batch = 100

    def __init__(self, worker: "Worker") -> None:
        super().__init__(worker._stop)
        self.w = worker
        self._cv = threading.Condition()     # guards _pending and _busy
        self._pending: List[Outcome] = []
        self._busy = 0                       # writes under way (here or inline)

    def submit(self, outcome: Outcome, alone: bool) -> bool:
        """Queue an outcome; returns False (queuing nothing) when the job is ``alone``
        (the worker's only one) and the finisher idle: the caller then writes it
        itself, saving a thread hop when jobs come one at a time."""
        with self._cv:
            if alone and not self._pending and not self._busy:
                return False
            self._pending.append(outcome)
            self._cv.notify()
            return True

    def loop(self) -> None:
        with self._cv:
            if not self._pending:
                self._cv.wait(0.5)
            batch = self._pending[:self.max_batch]
            del self._pending[:len(batch)]
        if batch:
            self.write(batch)

    def write(self, batch: List[Outcome], keep_one: bool = False) -> Optional[Job]:
        """Write a batch and hand its slots on (finisher thread, or a pool thread inline).
        With ``keep_one``, the first next job is returned for the caller to run itself."""
        with self._cv:
            self._busy += 1
        self.w._set_finishing(batch, True)   # the renewer keeps their locks while this retries
        try:
            fetch = len(batch) if self.w._fetch_next_allowed() else 0
            next_jobs = self.w._runner.finish(batch, fetch)
        except Exception:
            self.w._set_finishing(batch, False)
            with self._cv:       # keep them: written on the next try (the role backs off)
                self._pending[:0] = batch
                self._cv.notify()
            raise
        finally:
            with self._cv:
                self._busy -= 1
        return self.w._after_finish(batch, next_jobs, keep_one)

    def interrupt(self) -> None:
        with self._cv:
            self._cv.notify_all()


class Worker:
    """Processes jobs of one queue with ``concurrency`` threads.

    ``processor(job)`` returns a JSON-able value (the job's ``returnvalue``) or
    raises (the job's ``failedReason``); a mapping ``{job_name: function}`` routes each
    job by its name (an unknown name fails the job). Durations are seconds.
    ``metrics={"max_data_points": n}`` records BullMQ's per-minute completed/failed
    counts (``Queue.get_metrics``).
    """

    def __init__(self, name: str, processor: ProcessorLike, connection: ConnectionLike = None, *,
                 concurrency: int = 1, prefix: str = "bull", lock_duration: Seconds = 30.0,
                 stalled_interval: Seconds = 30.0, max_stalled_count: int = 1,
                 drain_delay: Seconds = 5.0, limiter: Optional[Mapping[str, Any]] = None,
                 remove_on_complete: Any = None, remove_on_fail: Any = None,
                 backoff_strategies: Optional[Dict[str, BackoffStrategy]] = None,
                 worker_name: Optional[str] = None, autorun: bool = False,
                 skip_stalled_check: bool = False, max_reconnect_delay: Seconds = 5.0,
                 metrics: Optional[Mapping[str, Any]] = None) -> None:
        self.processor = as_processor(processor)
        self.keys = QueueKeys(prefix, name)
        self.name = name
        self.concurrency = check.integer(concurrency, "concurrency", minimum=1, maximum=10_000)
        self.max_stalled_count = check.integer(max_stalled_count, "max_stalled_count", minimum=0)
        self.lock_duration_ms = self._positive_ms(lock_duration, "lock_duration")
        self.stalled_interval = self._positive_ms(stalled_interval, "stalled_interval") / 1000.0
        self.drain_delay = float(check.seconds(drain_delay, "drain_delay", allow_none=False,
                                               maximum=MAX_BLOCK))
        self.max_reconnect_delay = float(check.seconds(max_reconnect_delay, "max_reconnect_delay",
                                                       allow_none=False, maximum=MAX_BLOCK))
        if self.max_reconnect_delay <= 0:
            check.bad_value("max_reconnect_delay", max_reconnect_delay, "must be > 0 seconds")
        self.lock_retry_interval = lock_retry_interval(self.lock_duration_ms / 1000.0)
        self.limiter = self._limiter(limiter)
        self.remove_on_complete = job_options.encode(
            {"remove_on_complete": remove_on_complete}).get("removeOnComplete")
        self.remove_on_fail = job_options.encode(
            {"remove_on_fail": remove_on_fail}).get("removeOnFail")
        self.backoff_strategies = check.mapping(backoff_strategies, "backoff_strategies")
        for kind, fn in self.backoff_strategies.items():
            check.function(fn, f"backoff_strategies[{kind!r}]")
        self.worker_name = check.optional_string(worker_name, "worker_name")
        self.skip_stalled_check = check.boolean(skip_stalled_check, "skip_stalled_check")
        self.max_metrics_points = max_data_points(metrics)
        self.client_name = worker_client_name(prefix, name, self.worker_name)
        check.boolean(autorun, "autorun")
        self.id = uuid.uuid4().hex
        self.connection = as_connection(connection)
        self._owns_connection = self.connection is not connection
        self.client = self.connection.client
        self.queue = Queue(name, connection=self.connection, prefix=prefix)
        self.scripts = self.queue.scripts       # one script registry per connection user
        self._runner = JobRunner(self)
        self._listeners: Dict[str, List[Callable[..., Any]]] = {e: [] for e in LISTENER_EVENTS}
        self._stop = threading.Event()          # stops the renewer and the stalled checker
        self._fetch_stop = threading.Event()    # stops the fetcher (first, at close)
        self._cv = threading.Condition()          # guards the fields below
        self._free = concurrency
        self._paused = False
        self._active: Dict[str, Job] = {}
        self._state = "new"      # new -> running -> closing -> closed; forked: see below
        self._roles: List[Role] = []
        self._executor: Optional[ThreadPoolExecutor] = None
        self._shutdown_requested = threading.Event()
        self._forked_from: Optional[int] = None
        _fork.track(self)
        self._closer: Optional[threading.Thread] = None    # close() called from a handler
        if autorun:
            self.start()

    def _after_fork_in_child(self) -> None:
        """A forked child does not run (nor share) its parent's worker: a started copy
        becomes inert, ``start()`` refuses, ``close()`` only closes this process's
        connections. Its active jobs are the parent's: their locks are never renewed
        nor their outcomes written here. A never-started copy may start here."""
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._fetch_stop = threading.Event()
        self._shutdown_requested = threading.Event()
        self._active = {}
        self._free = self.concurrency
        self._roles = []
        self._executor = None
        if self._state in ("running", "closing"):
            self._state = "forked"
            self._forked_from = os.getppid()

    @staticmethod
    def _positive_ms(value: Seconds, arg: str) -> int:
        ms = int(check.seconds(value, arg, allow_none=False) * 1000)
        if ms < 1:
            check.bad_value(arg, value, "must be at least 1 ms")
        return ms

    @staticmethod
    def _limiter(limiter: Optional[Mapping[str, Any]]) -> Optional[Dict[str, int]]:
        if limiter is None:
            return None
        limiter = check.mapping(limiter, "limiter")
        check.known_keys(limiter, ("max", "duration"), "limiter")
        if "max" not in limiter or "duration" not in limiter:
            check.bad_value("limiter", limiter, "must be {'max': n, 'duration': seconds}")
        maximum = check.integer(limiter["max"], "limiter.max", minimum=1)
        return {"max": maximum,
                "duration": Worker._positive_ms(limiter["duration"], "limiter.duration")}

    # -- listeners ---------------------------------------------------------
    def on(self, event: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Local listener: active(job), completed(job, result), failed(job, exc),
        error(exc), stalled(job_id), drained(), closed()."""
        check.one_of(event, LISTENER_EVENTS, "event", "worker event")
        check.function(fn, "fn")
        self._listeners[event].append(fn)
        return fn

    def _emit(self, event: str, *args: Any) -> None:
        for fn in list(self._listeners[event]):
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - a listener must not break the worker
                log.exception("worker %s listener for %r failed", self.name, event)

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> "Worker":
        """Start the background threads and return; jobs are processed until close().
        Atomic: when Redis does not answer, ``errors.ConnectionError`` is raised and the
        worker is left as it was, startable (``run()`` waits for Redis instead)."""
        self._check_startable()
        self.connection.ping()
        with self._cv:
            self._check_startable()          # close() or another start() came meanwhile
            self._executor = ThreadPoolExecutor(self.concurrency,
                                                thread_name_prefix=f"orijs-worker-{self.name}")
            self._roles = self._make_roles()
            self._state = "running"
        for role in self._roles:
            role.start(f"orijs-{role.name}-{self.name}")
        return self

    def _check_startable(self) -> None:
        if self._state == "forked":
            raise errors.InvalidStateError(
                f"worker {self.name!r} was started in process {self._forked_from}, which "
                f"forked this one; a child does not run its parent's worker: create a new "
                f"Worker here (after the fork)")
        if self._state != "new":
            raise errors.InvalidStateError(f"worker is {self._state}; a worker starts once")

    def _make_roles(self) -> List[Role]:
        fetcher = _Fetcher(self)
        self._finisher = _Finisher(self)
        roles: List[Role] = [fetcher, self._finisher, LockRenewer(self)]
        if not self.skip_stalled_check:
            roles.append(Periodic(self._stop, "stalled-checker", self.stalled_interval,
                                  self._check_stalled))
        for role in roles:
            role.on_error = lambda exc: self._emit("error", exc)  # type: ignore[method-assign]
            role.max_delay = self.max_reconnect_delay
            role.probe = self.connection.ping
        return roles

    def run(self, connect_timeout: Optional[Seconds] = None) -> None:
        """Start and block until SIGINT/SIGTERM (or ``close()`` from another thread).
        Until Redis answers, start is retried: at once, then after a logged pause that
        grows to ``max_reconnect_delay``; after ``connect_timeout`` seconds (default:
        never) ``errors.TimeoutError`` is raised."""
        timeout = check.seconds(connect_timeout, "connect_timeout")
        run_until_signalled(lambda: self._start_when_redis_answers(timeout), self.close,
                            self._shutdown_requested)

    def _start_when_redis_answers(self, timeout: Optional[float]) -> bool:
        """``start()`` until it succeeds (True) or a shutdown is requested (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while not self._shutdown_requested.is_set():
            try:
                self.start()
                return True
            except errors.InvalidStateError:
                if self._shutdown_requested.is_set():      # closed while starting
                    return False
                raise
            except errors.ConnectionError as exc:
                failures += 1
                delay = backoff_delay(failures, self.max_reconnect_delay)
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise errors.TimeoutError(
                            f"worker {self.name}: Redis at {self.connection.address} did not "
                            f"answer within {timeout:g}s ({exc})") from exc
                    delay = min(delay, left)
                log.warning("worker %s: waiting for Redis at %s (%s); next try in %.1fs",
                            self.name, self.connection.address, exc, delay)
                self._shutdown_requested.wait(delay)
        return False

    def close(self, timeout: Optional[float] = None) -> bool:
        """Stop fetching, let active jobs finish (up to ``timeout`` seconds), join every
        thread. Idempotent. Returns False if active jobs were still running at the timeout
        (their locks are no longer renewed: another worker takes them over when they stall).

        From inside one of this worker's handlers, close() cannot wait for the calling job:
        it stops fetching and returns False at once; a closer thread finishes closing
        (the calling job's outcome written first) once the handler returns."""
        timeout = wait_timeout(timeout)
        handling: object = getattr(_handling, "worker", None)
        if handling is self:
            return self._close_from_handler(timeout)
        closed = self._close(timeout)
        with self._cv:
            closer = self._closer
        if closer is not None and closer is not threading.current_thread():
            closer.join(None if closed else 0)
        return closed

    def _close_from_handler(self, timeout: Optional[float]) -> bool:
        with self._cv:
            start = self._closer is None and self._state in ("new", "running")
            if start:
                self._fetch_stop.set()          # no new job from now on
                self._closer = threading.Thread(target=self._close, args=(timeout,),
                                                name=f"orijs-closer-{self.name}", daemon=True)
            closer = self._closer
        if start and closer is not None:
            log.info("worker %s: close() from a handler; closing once it returns", self.name)
            closer.start()
        return False

    def _close(self, timeout: Optional[float]) -> bool:
        with self._cv:
            if self._state in ("closing", "closed"):
                state = self._state
            else:
                state, self._state = self._state, "closing"
            self._fetch_stop.set()
            self._cv.notify_all()
        if state == "closed":
            return True
        if state == "closing":
            return self._wait_closed(timeout)
        self._shutdown_requested.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        fetcher = self._roles[0] if self._roles else None
        if fetcher is not None:
            self._stop_role(fetcher, deadline)
        drained = self._wait_idle(None if deadline is None else max(deadline - time.monotonic(), 0))
        self._stop.set()
        for role in self._roles:
            self._stop_role(role, deadline)
        if self._executor is not None:
            self._executor.shutdown(wait=drained)
        if fetcher is not None:
            fetcher.blocking.close()  # type: ignore[attr-defined]
        if self._owns_connection and drained:
            self.connection.close()
        with self._cv:
            self._state = "closed"
            self._cv.notify_all()
        self._emit("closed")
        return drained

    @staticmethod
    def _stop_role(role: Role, deadline: Optional[float]) -> None:
        """Join a role whose stop event is set, interrupting its blocking call; past the
        deadline the (daemon) thread is left to end on its own."""
        role.interrupt()
        while not role.join(0.2):
            if deadline is not None and time.monotonic() > deadline:
                log.warning("worker role %s did not stop in time", role.name)
                return
            role.interrupt()

    def _wait_idle(self, timeout: Optional[float]) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: not self._active and self._free == self.concurrency,
                                     timeout)

    def _wait_closed(self, timeout: Optional[float]) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: self._state == "closed", timeout)

    def __enter__(self) -> "Worker":
        if self._state == "new":
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_running(self) -> bool:
        return self._state == "running"

    # -- local pause -------------------------------------------------------
    def pause(self, wait: bool = True, timeout: Optional[float] = None) -> None:
        """Stop taking new jobs in this worker; with ``wait``, until active jobs finish."""
        check.boolean(wait, "wait")
        timeout = wait_timeout(timeout)
        with self._cv:
            self._paused = True
        if wait:
            self._wait_idle(timeout)

    def resume(self) -> None:
        with self._cv:
            self._paused = False
            self._cv.notify_all()

    @property
    def is_paused(self) -> bool:
        return self._paused

    # -- slots and dispatch (fetcher thread) -------------------------------
    def _take_slots(self) -> int:
        with self._cv:
            ready = self._cv.wait_for(
                lambda: self._stop_fetching() or (self._free > 0 and not self._paused), timeout=1.0)
            if not ready or self._stop_fetching():
                return 0
            taken, self._free = self._free, 0
            return taken

    def _stop_fetching(self) -> bool:
        return self._state != "running" or self._fetch_stop.is_set()

    def _give_back_slots(self, count: int) -> None:
        if count:
            with self._cv:
                self._free += count
                self._cv.notify_all()

    def _move_to_active(self, count: int) -> "tuple[List[Job], int, int]":
        k = self.keys
        jobs_raw, ttl, next_delayed = self._run_hot_script(
            "moveToActive", [k.wait, k.active, k.marker],
            [k.base, now_ms(), dumps(self._runner.fetch_opts(count)), count])
        jobs = [self._job_from_reply(f, i, t) for f, i, t in jobs_raw]
        return jobs, int(ttl), int(next_delayed)

    def _run_hot_script(self, name: str, keys: List[str], args: List[Any]) -> Any:
        """The per-job scripts, on the calling worker thread's own connection (through
        the cluster client on a cluster, which picks the node owning the queue)."""
        if self.connection.is_cluster:
            return self.scripts.run(name, keys, args)
        return self.scripts.run_direct(self.connection.direct_connection(), name, keys, args,
                                       self.connection.address)

    def _job_from_reply(self, fields: List[str], job_id: str, token: str) -> Job:
        raw = dict(zip(fields[::2], fields[1::2]))
        try:
            job = Job.from_hash(self.queue, str(job_id), raw)
        except Exception as exc:  # noqa: BLE001 - a poison hash fails its job only
            job = Job(self.queue, str(job_id), str(raw.get("name", "")), None)
            job.problem = f"the job hash cannot be read: {exc}"
        job.token = token
        job._lock_until = time.monotonic() + self.lock_duration_ms / 1000.0
        job._worker = self
        return job

    def _dispatch(self, job: Job) -> None:
        assert self._executor is not None
        with self._cv:
            self._active[job.id] = job   # counted before the thread starts: close() waits for it
        self._executor.submit(self._run, job)

    def _run(self, job: Optional[Job]) -> None:
        """Pool thread: run the handler; the outcome goes to the finisher, which keeps
        the job's slot for the next job it takes. A lone job's outcome is written here,
        and the next job that call took is run here too. A job moved otherwise (retried,
        delayed...) frees its slot."""
        while job is not None:
            outcome = None
            _handling.worker = self       # close() from the handler must not wait for it
            try:
                outcome = self._runner.process(job)
            except Exception:  # noqa: BLE001 - e.g. Redis down while retrying: the job will stall
                log.exception("worker %s: unexpected error while processing job %s",
                              self.name, job.id)
            finally:
                _handling.worker = None
            if outcome is None:
                with self._cv:
                    self._forget(job)
                    self._free += 1
                    self._cv.notify_all()
                return
            with self._cv:
                alone = len(self._active) == 1
            if self._finisher.submit(outcome, alone):
                return
            try:
                job = self._finisher.write([outcome], keep_one=True)
            except Exception:  # noqa: BLE001 - kept by the finisher, written on its next try
                log.warning("worker %s: writing job %s failed; the finisher retries it",
                            self.name, outcome.job.id, exc_info=True)
                return

    def _after_finish(self, batch: List[Outcome], next_jobs: List[Job],
                      keep_one: bool = False) -> Optional[Job]:
        """The batch is written; its slots go to the next jobs, the rest are freed. The
        next jobs go to the pool, but for the first one when ``keep_one``: it is returned."""
        with self._cv:
            for outcome in batch:
                self._forget(outcome.job)
            for job in next_jobs:
                self._active[job.id] = job
            released = len(batch) - len(next_jobs)
            if released:
                self._free += released
                self._cv.notify_all()
        kept = next_jobs.pop(0) if keep_one and next_jobs else None
        assert self._executor is not None
        for job in next_jobs:
            self._executor.submit(self._run, job)
        return kept

    def _set_finishing(self, batch: List[Outcome], finishing: bool) -> None:
        with self._cv:
            for outcome in batch:
                outcome.job._finishing = finishing

    def _forget(self, job: Job) -> None:
        """Under ``_cv``: the job no longer needs its lock renewed."""
        if self._active.get(job.id) is job:
            del self._active[job.id]

    def _fetch_next_allowed(self) -> bool:
        return self._state == "running" and not self._paused and not self._fetch_stop.is_set()

    # -- stalled checks (lock renewal: _locks.LockRenewer) ------------------
    def _check_stalled(self) -> None:
        k = self.keys
        moved = self.scripts.run(
            "moveStalledJobsToWait",
            [k.stalled, k.wait, k.active, k.stalled_check, k.meta, k.paused, k.marker, k.events,
             k.repeat],
            [self.max_stalled_count, k.base, now_ms(), int(self.stalled_interval * 1000)])
        for job_id in moved:
            log.info("worker %s: job %s stalled and went back to wait", self.name, job_id)
            self._emit("stalled", job_id)

    # -- rate limiting -----------------------------------------------------
    def rate_limit(self, seconds: Seconds) -> None:
        """From a handler: stop the whole queue (all workers, Node's too) for ``seconds``.
        Then ``raise errors.RateLimitError()``: the job goes back to wait, no attempt counted."""
        if self.limiter is None:
            raise errors.InvalidStateError("rate_limit() needs a worker created with "
                                           "limiter={'max': n, 'duration': seconds}")
        ms = int(check.seconds(seconds, "seconds", allow_none=False) * 1000)
        if ms > 0:
            self.client.set(self.keys.limiter, 9007199254740991, px=ms)

    def _move_back_to_wait(self, job: Job) -> None:
        k = self.keys
        code = self._runner.run_script("moveJobFromActiveToWait",
                                [job.key, k.active, k.stalled, k.limiter],
                                [k.base, job.id, job.token])
        if isinstance(code, int) and code < 0:
            log.warning("job %s could not go back to wait after a rate limit (code %s)",
                        job.id, code)
