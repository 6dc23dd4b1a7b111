"""Worker: a fetch thread, a pool of ``concurrency`` handler threads, one lock
renewer and one stalled-jobs checker, all owned, stopped and joined by ``close()``.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import _fork, errors
from . import options as job_options
from ._processing import BackoffStrategy, JobRunner, Outcome
from ._roles import Periodic, Role
from ._util import Seconds, dumps, now_ms, to_seconds
from .connection import ConnectionLike, as_connection
from .job import Job
from .keys import QueueKeys
from .queue import Queue

log = logging.getLogger(__name__)

Processor = Callable[[Job], Any]
LISTENER_EVENTS = ("active", "completed", "failed", "error", "stalled", "drained", "closed")


class _Fetcher(Role):
    """Moves jobs to active while slots are free; otherwise blocks on the marker key."""

    name = "fetcher"

    def __init__(self, worker: "Worker") -> None:
        super().__init__(worker._fetch_stop)
        self.w = worker
        self.blocking = worker.connection.blocking_client(worker.drain_delay)
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
        self.w._set_finishing(batch, True)   # their locks go now: not for the renewer
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
    raises (the job's ``failedReason``). Durations are seconds.
    """

    def __init__(self, name: str, processor: Processor, connection: ConnectionLike = None, *,
                 concurrency: int = 1, prefix: str = "bull", lock_duration: Seconds = 30.0,
                 stalled_interval: Seconds = 30.0, max_stalled_count: int = 1,
                 drain_delay: Seconds = 5.0, limiter: Optional[Mapping[str, Any]] = None,
                 remove_on_complete: Any = None, remove_on_fail: Any = None,
                 backoff_strategies: Optional[Dict[str, BackoffStrategy]] = None,
                 worker_name: Optional[str] = None, autorun: bool = False,
                 skip_stalled_check: bool = False) -> None:
        if not callable(processor):
            raise TypeError("processor must be callable: processor(job) -> result")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
        if isinstance(max_stalled_count, bool) or not isinstance(max_stalled_count, int) \
                or max_stalled_count < 0:
            raise ValueError(f"max_stalled_count must be an integer >= 0, got {max_stalled_count!r}")
        self.name = name
        self.processor = processor
        self.concurrency = concurrency
        self.keys = QueueKeys(prefix, name)
        self.lock_duration_ms = int(to_seconds(lock_duration, "lock_duration") * 1000)  # type: ignore[operator]
        if self.lock_duration_ms < 1:
            raise ValueError("lock_duration must be > 0")
        self.stalled_interval = float(to_seconds(stalled_interval, "stalled_interval"))  # type: ignore[arg-type]
        self.max_stalled_count = max_stalled_count
        self.drain_delay = float(to_seconds(drain_delay, "drain_delay"))  # type: ignore[arg-type]
        self.limiter = self._limiter(limiter)
        self.remove_on_complete = job_options.encode(
            {"remove_on_complete": remove_on_complete}).get("removeOnComplete")
        self.remove_on_fail = job_options.encode(
            {"remove_on_fail": remove_on_fail}).get("removeOnFail")
        self.backoff_strategies = dict(backoff_strategies or {})
        self.worker_name = worker_name
        self.skip_stalled_check = skip_stalled_check
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
    def _limiter(limiter: Optional[Mapping[str, Any]]) -> Optional[Dict[str, int]]:
        if limiter is None:
            return None
        try:
            maximum = limiter["max"]
            duration = to_seconds(limiter["duration"], "limiter duration")
        except (KeyError, TypeError) as exc:
            raise ValueError("limiter must be {'max': n, 'duration': seconds}") from exc
        if isinstance(maximum, bool) or not isinstance(maximum, int) or maximum < 1:
            raise ValueError(f"limiter max must be an integer >= 1, got {maximum!r}")
        if not duration:
            raise ValueError("limiter duration must be > 0 seconds")
        return {"max": maximum, "duration": int(duration * 1000)}

    # -- listeners ---------------------------------------------------------
    def on(self, event: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Local listener: active(job), completed(job, result), failed(job, exc),
        error(exc), stalled(job_id), drained(), closed()."""
        if event not in self._listeners:
            raise ValueError(f"unknown worker event {event!r}; one of {', '.join(LISTENER_EVENTS)}")
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
        """Start the background threads and return; jobs are processed until close()."""
        with self._cv:
            if self._state == "forked":
                raise errors.InvalidStateError(
                    f"worker {self.name!r} was started in process {self._forked_from}, which "
                    f"forked this one; a child does not run its parent's worker: create a new "
                    f"Worker here (after the fork)")
            if self._state != "new":
                raise errors.InvalidStateError(f"worker is {self._state}; a worker starts once")
            self._state = "running"
        self.connection.ping()
        self._executor = ThreadPoolExecutor(self.concurrency,
                                            thread_name_prefix=f"orijs-worker-{self.name}")
        fetcher = _Fetcher(self)
        self._finisher = _Finisher(self)
        renewer = Periodic(self._stop, "lock-renewer", self.lock_duration_ms / 2000.0,
                           self._renew_locks)
        self._roles = [fetcher, self._finisher, renewer]
        if not self.skip_stalled_check:
            self._roles.append(Periodic(self._stop, "stalled-checker", self.stalled_interval,
                                        self._check_stalled))
        for role in self._roles:
            role.on_error = lambda exc: self._emit("error", exc)  # type: ignore[method-assign]
            role.start(f"orijs-{role.name}-{self.name}")
        return self

    def run(self) -> None:
        """Start and block until SIGINT/SIGTERM (or ``close()`` from another thread)."""
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, lambda *_: self._shutdown_requested.set())
        try:
            self.start()
            while not self._shutdown_requested.wait(1.0):
                pass
        finally:
            self.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def close(self, timeout: Optional[float] = None) -> bool:
        """Stop fetching, let active jobs finish (up to ``timeout`` seconds), join every
        thread. Idempotent. Returns False if active jobs were still running at the timeout
        (their locks are no longer renewed: another worker takes them over when they stall)."""
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
        job = Job.from_hash(self.queue, str(job_id), dict(zip(fields[::2], fields[1::2])))
        job.token = token
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
            try:
                outcome = self._runner.process(job)
            except Exception:  # noqa: BLE001 - e.g. Redis down while retrying: the job will stall
                log.exception("worker %s: unexpected error while processing job %s",
                              self.name, job.id)
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
        return self._state == "running" and not self._paused

    # -- lock renewal and stalled checks -----------------------------------
    def _renew_locks(self) -> None:
        with self._cv:
            snapshot = [(job_id, job.token) for job_id, job in self._active.items()
                        if not job._finishing]
        if not snapshot:
            return
        k = self.keys
        lost = self.scripts.run("extendLocks", [k.stalled],
                                [k.base, dumps([s[0] for s in snapshot]),
                                 dumps([s[1] for s in snapshot]), self.lock_duration_ms])
        with self._cv:   # a job that finished meanwhile is not lost
            tokens = dict(snapshot)
            lost = [i for i in lost if i in self._active and not self._active[i]._finishing
                    and self._active[i].token == tokens[i]]
        for job_id in lost:
            log.warning("worker %s lost the lock of job %s; its result will not be written",
                        self.name, job_id)
            self._emit("error", errors.LockLost(f"lock of job {job_id} lost"))

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
        ms = int(float(to_seconds(seconds, "seconds", allow_none=False)) * 1000)  # type: ignore[arg-type]
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
