"""GroupWorker: runs a GroupQueue's jobs, never two of one group at once.

Threads (each owned and joined by ``close()``): a fetcher reserving jobs for free
slots (a batch of one job per free group; ``BZPOPMIN`` on the ready set when
nothing can be taken, so an idle worker never polls), ``concurrency`` handler
threads, a finisher writing many completions per script call (each taking its
group's next job for the same slot in that call), a heartbeat extending the
deadlines of the jobs held, a stalled checker recovering jobs whose worker died
and groups left out of ready, a scheduler promoting delayed and staged jobs
and adding repeating jobs' runs, and (``enable_cleanup``) GroupMQ's cleanup pass.
With ordering "in-memory" a handler thread first waits out GroupMQ's grace
collection for its job's group (``_ordering``). With ``processes=N`` each handler
runs in one of N child processes (``_process_mode``).
"""
from __future__ import annotations

import logging
import queue as queue_module
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional

from ..base import fork
from ..base.roles import Periodic, Role, run_until_signalled
from ..base.util import Counter, Seconds, dumps, now_ms
from ..engine.children import Abandoned, ChildPool
from ..engine.job_log import job_extra, log_completed, log_failure
from ..engine.locks import write_through_blip
from . import _housekeeping, _manual
from . import _options as opt
from . import _process_mode as procs
from . import _worker_options as wopt
from ._fetch import Fetcher, Slots
from ._finish import Finisher
from ._ordering import GraceCollector
from .job import GroupJob
from .queue import GroupQueue

log = logging.getLogger(__name__)
GROUP_LOG = logging.getLogger("orijs_sync.groups")    # its jobs' lines (docs/logging.md)

EVENTS = ("ready", "completed", "failed", "error", "stalled", "graceful-timeout", "closed")
DEFAULT_CLOSE_TIMEOUT = 30.0      # seconds; GroupMQ's close(gracefulTimeoutMs = 30000)
STOP_GRACE = 5.0      # seconds for the threads to end once close() gave the running jobs back
Handler = procs.Handler


class GroupWorker:
    """Processes ``queue``'s jobs with ``handler(job)``; its return value (JSON) is the
    job's ``returnvalue``, an exception a failed attempt (retried after ``backoff``
    while attempts remain, keeping the job's place in its group).

    ``backoff``: ``None`` (GroupMQ's default, 0.5 s doubling up to 30 s), seconds, or
    a function of the attempt number returning seconds. ``stalled_interval`` is how
    often (seconds) jobs whose deadline is ``stalled_grace_period`` past are recovered;
    a job found stalled more than ``max_stalled_count`` times fails.

    ``concurrency`` (default 1, GroupMQ's): jobs run at once, each of another group.
    GroupMQ's worker options, in seconds: ``name`` (metrics and logs; the queue's name
    by default), ``heartbeat`` (``heartbeatMs``: how often the held jobs' deadlines are
    extended; default a third of ``job_timeout``, at most 10 s; shorter than
    ``job_timeout``), ``on_error(exc, job)`` (``onError``: called with the job when its
    handler raised, with ``None`` for a worker error, the ``error`` event's),
    ``max_attempts`` (``maxAttempts``: no job runs more often than that, nor more than
    its own ``max_attempts``), ``enable_cleanup``/``cleanup_interval`` (GroupMQ's
    cleanup pass every 60 s by default, see ``GroupQueue.cleanup``).

    ``handler`` is a function or its import name (``"package.module:function"``).
    Process mode, as a Worker's: ``processes=N`` runs each handler in one of N child
    processes (``concurrency`` then defaults to N), the handler pickled by reference (a
    module's top-level function, or its name); ``job_timeout`` seconds kills a handler's
    child (a failed attempt; the queue's own ``job_timeout`` is the reservation's,
    heartbeated meanwhile); ``max_jobs_per_process`` replaces a child after that many
    jobs. A child's death fails its job (``errors.ChildDied``); at a ``close`` past its
    timeout the children running jobs are killed and their jobs go back to their place,
    no attempt counted."""

    def __init__(self, queue: GroupQueue, handler: Any, *, concurrency: Optional[int] = None,
                 backoff: Any = None, stalled_interval: Seconds = 30,
                 max_stalled_count: int = 1, block_timeout: Seconds = 5,
                 scheduler_interval: Optional[Seconds] = None, name: Optional[str] = None,
                 heartbeat: Optional[Seconds] = None,
                 on_error: Optional[wopt.OnError] = None, max_attempts: Optional[int] = None,
                 stalled_grace_period: Seconds = 0, enable_cleanup: bool = True,
                 cleanup_interval: Seconds = wopt.DEFAULT_CLEANUP_INTERVAL,
                 processes: Optional[int] = None, job_timeout: Optional[Seconds] = None,
                 max_jobs_per_process: Optional[int] = None) -> None:
        if not isinstance(queue, GroupQueue):
            raise opt.GroupOptionError(f"queue must be a GroupQueue, not {type(queue).__name__}")
        self.queue = queue
        self.handler = procs.as_handler(handler)
        self.concurrency, self.process_options = procs.options(
            concurrency, processes, job_timeout, max_jobs_per_process)
        self._handler_spec = procs.spec(handler) if self.process_options else None
        self._backoff = opt.backoff(backoff)
        self.stalled_interval = self._seconds(stalled_interval, "stalled_interval")
        self.max_stalled_count = opt.count(max_stalled_count, "max_stalled_count")
        self.block_timeout = self._seconds(block_timeout, "block_timeout")
        window = queue.ordering_window_ms / 1000.0
        default_tick = min(1.0, window / 4) if queue.ordering == "scheduler" else 1.0
        self.scheduler_interval = self._seconds(scheduler_interval or default_tick,
                                                "scheduler_interval")
        self.settings = wopt.settings(
            queue, name=name, heartbeat=heartbeat, on_error=on_error,
            max_attempts=max_attempts, stalled_grace_period=stalled_grace_period,
            enable_cleanup=enable_cleanup, cleanup_interval=cleanup_interval)
        self.name = self.settings.name
        self.heartbeat_interval = self.settings.heartbeat
        self._listeners: Dict[str, List[Callable[..., None]]] = {name: [] for name in EVENTS}
        self._state = "new"
        self._last_pickup = 0                    # epoch ms of the last job taken
        self._processed = 0                      # jobs finished (completed or failed)
        self._fresh()
        fork.track(self)

    def _fresh(self) -> None:
        """The worker's identity, locks, threads and held jobs, none yet."""
        self.id = uuid.uuid4().hex               # the worker; each run's token is id:n
        self._tokens = Counter()
        self._starting = threading.RLock()       # held while start() starts the threads
        self._lock = threading.Lock()            # guards _held, _current, _state, _listeners,
        #                                          _last_pickup, _processed
        self._held: Dict[str, GroupJob] = {}     # reserved by this worker, not finished
        self._current: Dict[str, "tuple[GroupJob, int]"] = {}   # running: (job, started ms)
        self._slots = Slots(self.concurrency)
        self._jobs: "queue_module.SimpleQueue[Optional[GroupJob]]" = \
            queue_module.SimpleQueue()
        self._fetch_stop = threading.Event()
        self._roles_stop = threading.Event()
        self._shutdown_requested = threading.Event()
        self._handlers: List[threading.Thread] = []
        self._fetcher: Optional[Fetcher] = None
        self._finisher = Finisher(self.queue, self._new_token,
                                  lambda: not self._fetch_stop.is_set(), self._chained,
                                  self._completed, self._slots.release,
                                  lambda exc: self._emit("error", exc))
        self._roles: List[Role] = []
        self._ordering = GraceCollector(self.queue, self._new_token, self._roles_stop)
        self._groups_cursor = "0"                # owned by the stalled role's thread
        self._children: Optional[ChildPool] = None   # process mode: made by start()
        self._given_back: List[GroupJob] = []     # running when close() killed their child

    def _after_fork_in_child(self) -> None:
        """A forked child's copy is a worker of its own: a new id (so its runs' tokens
        are its own), fresh locks, no threads nor held jobs. A started copy is inert
        (its threads and jobs are the parent's): ``start()`` does nothing, ``close()``
        returns at once. A never-started copy may start here."""
        self._fresh()
        if self._state == "running":
            self._state = "forked"

    def _new_token(self) -> str:
        """The token of one reservation: every run of a job holds its own, so a late
        write of an earlier run is refused (BullMQ's ``{worker id}:{n}`` form)."""
        return f"{self.id}:{self._tokens.take()}"

    @staticmethod
    def _seconds(value: Seconds, name: str) -> float:
        if value is None:
            raise opt.GroupOptionError(f"{name} is required")
        return opt.seconds(value, name, positive=True) or 0.0

    # -- events ------------------------------------------------------------------------

    def on(self, event: str, fn: Callable[..., None]) -> "GroupWorker":
        """``ready()`` (started), ``completed(job, result)``, ``failed(job, exc)``,
        ``error(exc)``, ``stalled(job_id, group_id)``, ``graceful-timeout(job)`` (still
        running when ``close``'s timeout ran out), ``closed()``; called on the worker's
        threads (``ready`` on the one calling ``start``, ``closed`` and
        ``graceful-timeout`` on the one calling ``close``)."""
        self._check_event(event)
        if not callable(fn):
            raise opt.GroupOptionError("an event listener must be callable")
        with self._lock:
            self._listeners[event].append(fn)
        return self

    def off(self, event: str, fn: Callable[..., None]) -> "GroupWorker":
        """Remove one registration of ``fn`` for ``event`` (none: nothing happens)."""
        self._check_event(event)
        with self._lock:
            if fn in self._listeners[event]:
                self._listeners[event].remove(fn)
        return self

    def remove_all_listeners(self, event: Optional[str] = None) -> "GroupWorker":
        """Remove every listener of ``event``, or of every event."""
        if event is not None:
            self._check_event(event)
        with self._lock:
            for name in ([event] if event else EVENTS):
                self._listeners[name] = []
        return self

    def _check_event(self, event: str) -> None:
        if event not in self._listeners:
            raise opt.GroupOptionError(f"unknown event {event!r}; one of {EVENTS}")

    def _emit(self, event: str, *args: Any) -> None:
        if event == "error":
            self.settings.report(args[0])
        with self._lock:
            listeners = list(self._listeners[event])
        for fn in listeners:
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - a listener must not break the worker
                log.exception("group worker %s listener failed", event)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> "GroupWorker":
        """Start the worker's threads (idempotent); returns the worker. ``close()`` stops
        them."""
        with self._lock:
            if self._state != "new":
                return self
            self._state = "running"
        with self._starting:     # a close() meanwhile (from a listener) waits for the threads
            self._start_threads()
        self._emit("ready")
        return self

    def _start_threads(self) -> None:
        self._start_children()
        name = self.queue.name
        self._finisher.start()
        for i in range(self.concurrency):
            thread = threading.Thread(target=self._handler_loop, daemon=True,
                                      name=f"orijs-group-handler-{name}-{i}")
            thread.start()
            self._handlers.append(thread)
        self._fetcher = Fetcher(self._fetch_stop, self.queue, self._new_token, self._slots,
                                self._dispatch, self.block_timeout)
        self._roles = [
            Periodic(self._roles_stop, "group-heartbeat", self.heartbeat_interval,
                     self._heartbeat),
            Periodic(self._roles_stop, "group-stalled", self.stalled_interval,
                     self._check_stalled),
            Periodic(self._roles_stop, "group-scheduler", self.scheduler_interval,
                     self._run_scheduler),
        ]
        if self.settings.cleanup_interval is not None:
            self._roles.append(Periodic(self._roles_stop, "group-cleanup",
                                        self.settings.cleanup_interval, self._cleanup))
        for role in [self._fetcher] + self._roles:
            role.on_error = lambda exc: self._emit("error", exc)  # type: ignore[method-assign]
            role.probe = self.queue.connection.ping   # resume at once after an outage
            role.start(f"orijs-{role.name}-{name}")
        GROUP_LOG.info("group worker for queue %s started: concurrency %d, Redis %s", name,
                       self.concurrency, self.queue.connection.address,
                       extra={"queue": name, "worker": self.id})

    def _start_children(self) -> None:
        """Process mode: the child processes start (importing the handler meanwhile)."""
        if self.process_options is None:
            return
        try:
            self._children = procs.child_pool(self.queue, self._handler_spec,
                                              self.process_options)
            self._children.start()
        except BaseException:
            self._close_children()
            with self._lock:
                self._state = "new"
            raise

    def _close_children(self) -> None:
        children, self._children = self._children, None
        if children is not None:
            children.close()

    def run(self) -> None:
        """Start and block until SIGINT/SIGTERM (or ``close()`` from another thread)."""
        run_until_signalled(self.start, self.close, self._shutdown_requested)

    def close(self, timeout: Optional[Seconds] = DEFAULT_CLOSE_TIMEOUT) -> bool:
        """Stop taking jobs, let the jobs this worker holds finish (up to ``timeout``
        seconds in all, 30 by default as GroupMQ's ``close(gracefulTimeoutMs)``;
        ``None`` waits for them however long), join every thread. Idempotent.
        ``False`` when jobs were still running at the timeout: each is emitted as
        ``graceful-timeout`` (no longer heartbeated: the stalled check recovers it).
        In process mode their children are killed instead, and their jobs go back to
        their place in their groups at once, no attempt counted (each still emitted as
        ``graceful-timeout``; ``True`` once they are all back).
        From a listener running on one of the worker's threads it joins every other
        thread, never its own, which ends once the listener returns."""
        limit = opt.seconds(timeout, "timeout")
        if limit is not None and limit < 0:
            raise opt.GroupOptionError(f"timeout must be >= 0 seconds, not {timeout!r}")
        with self._lock:
            if self._state in ("closed", "forked"):
                self._state = "closed"         # a forked copy: nothing of it runs here
                return True
            started, self._state = self._state != "new", "closed"
        self._shutdown_requested.set()
        self._fetch_stop.set()
        finished = True
        if started:
            with self._starting:     # start() has started every thread it starts
                pass
            finished = self._stop_threads(limit)
        with self._lock:
            late = self._given_back + ([] if finished else list(self._held.values()))
        for job in {job.id: job for job in late}.values():
            self._emit("graceful-timeout", job)
        self._emit("closed")
        return finished

    def _stop_threads(self, limit: Optional[float]) -> bool:
        """Fetcher first; then the held jobs finish (no more chaining), then the handler
        threads and the finisher end, then the roles (heartbeats ran until now). Called
        on one of these threads (from a listener), it joins every other one; that one
        ends on its own once the listener returns."""
        assert self._fetcher is not None
        me = threading.current_thread()
        deadline = None if limit is None else time.monotonic() + limit

        def left() -> Optional[float]:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        self._slots.wake()
        if not self._fetcher.is_current_thread():
            self._fetcher.stop(deadline)       # interrupts its blocking pop until it ends
        finished = self._wait_for_jobs(me, left())
        if not finished and self._children is not None:
            finished = self._give_back_running(me)
            deadline = time.monotonic() + STOP_GRACE    # no job runs now: threads end
        for _ in self._handlers:
            self._jobs.put(None)
        others = [thread for thread in self._handlers if thread is not me]
        finished = all([self._join(thread, left()) for thread in others]) and finished
        finished = self._finisher.stop(left()) and finished
        self._roles_stop.set()
        for role in self._roles:
            if not role.is_current_thread():
                role.join(left())
        self._fetcher.close()
        self._close_children()
        GROUP_LOG.info("group worker for queue %s closed%s", self.queue.name, "" if finished
                       else ": jobs still ran at its timeout (left to the stalled check)",
                       extra={"queue": self.queue.name, "worker": self.id})
        return finished

    def _give_back_running(self, me: threading.Thread) -> bool:
        """Process mode, ``close`` past its timeout: the children running jobs are
        killed (those waiting for a child do not start); each handler thread gives its
        job back (``Abandoned``). True once every slot is free again."""
        assert self._children is not None
        with self._lock:
            self._given_back = [job for job, _ in self._current.values()]
        self._children.kill_busy()
        return self._wait_for_jobs(me, self.queue.job_timeout_ms / 1000.0)

    def _wait_for_jobs(self, me: threading.Thread, limit: Optional[float]) -> bool:
        """Wait until the held jobs are finished: every slot free but the one held by a
        handler thread calling close (a ``failed`` or ``error`` listener, its own job's
        outcome written). The finisher calling it cannot wait for writes that are its
        own: joining the handler threads then waits for their jobs, and the finisher
        writes them once its listener returns (its batch's slots are settled before its
        ``completed`` events, so no job it chains is left behind)."""
        if self._finisher.is_current_thread():
            return True
        held_here = 1 if me in self._handlers else 0
        return self._slots.wait_all_free(self.concurrency - held_here, limit)

    @staticmethod
    def _join(thread: threading.Thread, limit: Optional[float]) -> bool:
        thread.join(limit)
        return not thread.is_alive()

    def __enter__(self) -> "GroupWorker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_current_jobs(self) -> List[Dict[str, Any]]:
        """The jobs running now: ``{"job": GroupJob, "processing_time": seconds}``."""
        now = now_ms()
        with self._lock:
            return [{"job": job, "processing_time": (now - started) / 1000.0}
                    for job, started in self._current.values()]

    def get_current_job(self) -> Optional[Dict[str, Any]]:
        """The longest-running job now (as in ``get_current_jobs``), or ``None``."""
        jobs = self.get_current_jobs()
        return max(jobs, key=lambda item: item["processing_time"]) if jobs else None

    def is_processing(self) -> bool:
        """Does the worker hold a job (running, held for ordering or finishing)?"""
        with self._lock:
            return bool(self._held)

    def get_worker_metrics(self) -> Dict[str, Any]:
        """GroupMQ's worker metrics, in seconds: ``total_jobs_processed``,
        ``last_job_pickup_time`` (epoch seconds or ``None``), ``time_since_last_job``,
        ``is_processing``, ``jobs_in_progress_count``, ``jobs_in_progress`` (``job_id``,
        ``group_id``, ``processing_time``)."""
        now = now_ms()
        current = [{"job_id": item["job"].id, "group_id": item["job"].group_id,
                    "processing_time": item["processing_time"]}
                   for item in self.get_current_jobs()]
        with self._lock:
            picked, total, held = self._last_pickup, self._processed, len(self._held)
        return {"name": self.name, "total_jobs_processed": total,
                "last_job_pickup_time": picked / 1000.0 if picked else None,
                "time_since_last_job": (now - picked) / 1000.0 if picked else None,
                "is_processing": held > 0, "jobs_in_progress_count": held,
                "jobs_in_progress": current}

    # -- jobs --------------------------------------------------------------------------

    def _dispatch(self, jobs: List[GroupJob]) -> None:
        with self._lock:
            self._last_pickup = now_ms()
            for job in jobs:
                self._held[job.id] = job
        for job in jobs:
            self._jobs.put(job)

    def _handler_loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                handed_over = self._process(job)
            except Exception as exc:  # noqa: BLE001 - Redis failed; the thread must live on
                log.warning("group job %s: %s (the stalled check recovers it)", job.id, exc)
                self._forget(job)
                self._emit("error", exc)
                handed_over = False
            if not handed_over:
                self._slots.release()

    def _process(self, job: GroupJob) -> bool:
        """Run one job; True when its outcome went to the finisher (which then frees
        the slot or hands it the group's next job)."""
        if self.queue.ordering == "in-memory":
            job = self._hold_for_order(job)
        started = now_ms()
        with self._lock:
            self._current[job.id] = (job, started)
        try:
            result = self._run_handler(job)
            text = dumps(result, f"return value of group job {job.id}")
        except Abandoned:                # its child was stopped by close(): given back
            self._give_back(job)
            return False
        except Exception as exc:  # noqa: BLE001 - the handler's failure is the job's
            with self._lock:
                self._stopped_running(job)
            self._fail(job, exc, started)
            return False
        with self._lock:
            self._stopped_running(job)
        self._finisher.put((job, result, text, started))
        return True

    def _run_handler(self, job: GroupJob) -> Any:
        children = self._children
        return self.handler(job) if children is None else children.run(job)

    def _give_back(self, job: GroupJob) -> None:
        try:
            back = procs.give_back(self.queue, job)
        finally:
            self._forget(job)
        if back:
            job.status = "waiting"
        else:
            log.warning("group job %s was given back after it stopped being ours", job.id)

    def _stopped_running(self, job: GroupJob) -> None:
        """Under ``_lock``: this run of ``job`` no longer runs (a later run of the same
        job, recovered meanwhile and taken again, keeps its entry)."""
        if self._current.get(job.id, (None, 0))[0] is job:
            del self._current[job.id]

    def _forget(self, job: GroupJob) -> None:
        """This run of ``job`` is no longer held (nor heartbeated) by this worker."""
        with self._lock:
            self._stopped_running(job)
            if self._held.get(job.id) is job:
                del self._held[job.id]

    def _log_extra(self, job: GroupJob, attempt: int) -> Dict[str, Any]:
        return dict(job_extra(self.queue.name, job.id, f"group {job.group_id}", attempt,
                              self.id), group_id=job.group_id)

    def _completed(self, job: GroupJob, result: Any, ok: bool) -> None:
        self._forget(job)
        if ok:
            log_completed(GROUP_LOG, self._log_extra(job, job.attempts_made + 1))
            with self._lock:
                self._processed += 1
            self._emit("completed", job, result)

    def _chained(self, job: GroupJob) -> None:
        if self.queue.ordering == "in-memory":
            self._ordering.chained(job)
        with self._lock:
            self._held[job.id] = job
            self._last_pickup = now_ms()
        self._jobs.put(job)

    def _fail(self, job: GroupJob, exc: BaseException, started: int) -> None:
        self.settings.report(exc, job)
        q = self.queue
        backoff_ms = opt.retry_delay_ms(self._backoff(job.attempts_made + 1))
        fields = _manual.error_fields(exc)     # as written: as Node's UTF-8 encoding does
        try:       # retried through a blip while the heartbeat keeps the job
            reply = write_through_blip(
                lambda: _manual.fail(q, job, fields, backoff_ms=backoff_ms, started=started,
                                     attempts_cap=self.settings.max_attempts or 0),
                q.job_timeout_ms / 1000.0)
        finally:
            self._forget(job)
        if not reply[0]:
            log.warning("group job %s failed after it stopped being ours", job.id)
            return
        job.status = "failed" if reply[0] == "failed" else "delayed" if backoff_ms else "waiting"
        job.attempts_made, job.failed_reason, job.stacktrace = int(reply[1]), fields[0], fields[2]
        log_failure(GROUP_LOG, self._log_extra(job, job.attempts_made), exc,
                    attempts=job.max_attempts,
                    retry_in_ms=None if job.status == "failed" else backoff_ms)
        with self._lock:
            self._processed += 1
        self._emit("failed", job, exc)

    def _hold_for_order(self, job: GroupJob) -> GroupJob:
        """Ordering "in-memory": the grace collection (see ``_ordering``)."""
        earlier = self._ordering.order(job)
        if earlier.id != job.id:
            with self._lock:
                self._held.pop(job.id, None)
                self._held[earlier.id] = earlier
        return earlier

    # -- background roles --------------------------------------------------------------

    def _heartbeat(self) -> None:
        with self._lock:
            held = list(self._held.values())
        if not held:
            return
        pairs = [value for job in held for value in (job.id, job.token)]
        lost = self.queue.run_script("heartbeat", now_ms(), self.queue.job_timeout_ms, *pairs)
        for job_id in lost:
            with self._lock:
                still_held = job_id in self._held
            if still_held:
                log.warning("group job %s is no longer this worker's (stalled, recovered "
                            "or removed)", job_id)

    def _run_scheduler(self) -> None:
        self.queue.run_scheduler_once()

    def _check_stalled(self) -> None:
        """Recover expired jobs, then walk a slice of the groups for ones left out of
        ready (a cursor over the groups set, one slice per interval)."""
        cursor, _ = self.queue.run_script("recover_groups", self._groups_cursor, 200)
        self._groups_cursor = str(cursor)
        self._stalled(_housekeeping.recover_stalled(self.queue, self.settings.stalled_grace_ms,
                                                    self.max_stalled_count))

    def _cleanup(self) -> None:
        """GroupMQ's cleanup pass (at most one a minute across Node and Python)."""
        self._stalled(_housekeeping.cleanup(self.queue, self.max_stalled_count,
                                            self.settings.stalled_grace_ms))

    def _stalled(self, found: List[_housekeeping.Stalled]) -> None:
        for job_id, group_id, action in found:
            log.warning("group job %s of group %s stalled: %s", job_id, group_id, action)
            self._emit("stalled", job_id, group_id)
