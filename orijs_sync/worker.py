"""Worker: one queue's handler, concurrency, limiter, pause and listeners. Its
threads (fetcher, finisher, lock renewer, stalled checker, handler pool) belong to
its engine (``engine.engine``): its own, or the one its ``WorkerGroup`` shares between
many queues. ``close()`` stops and joins them (a group's when its last worker closes).
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

from . import errors
from . import options as job_options
from ._processes import child_pool, describe, process_options
from ._worker_cancel import CancelMixin
from ._worker_events import LISTENER_EVENTS, EventsMixin
from ._worker_limits import RateLimitMixin
from ._worker_manual import ManualMixin, ManualTaker, no_processor
from ._worker_options import limiter_option, lock_and_start_options, positive_ms
from ._worker_run import RunMixin
from .base import fork
from .base import validate as check
from .base.pools import deadline_of, remaining
from .base.util import Seconds, now_ms, script_json
from .engine.children import ChildPool
from .engine.engine import Engine
from .engine.local import LOCAL
from .engine.locks import LockRenewer, lock_retry_interval
from .engine.processing import HELD, BackoffStrategy, JobRunner, Outcome, held_here
from .engine.routing import ProcessorLike, as_processor, sendable
from .job import Job
from .keys import QueueKeys
from .metrics import max_data_points
from .queue import Queue
from .store.connect import as_connection
from .store.connection import ConnectionLike
from .store.workers_list import worker_client_name
from .waits.futures import wait_timeout

if TYPE_CHECKING:  # pragma: no cover
    from .worker_group import WorkerGroup

log = logging.getLogger(__name__)

Processor = Callable[[Job], Any]
MAX_BLOCK = 3600.0   # longest block on the marker key
_handling = threading.local()    # .worker: the Worker whose handler this thread runs


class Worker(RunMixin, EventsMixin, ManualMixin, CancelMixin, RateLimitMixin):
    """Processes jobs of one queue with ``concurrency`` threads.

    ``processor(job)`` returns a JSON-able value (the job's ``returnvalue``) or
    raises (the job's ``failedReason``); a mapping ``{job_name: function}`` routes each
    job by its name (an unknown name fails the job). Durations are seconds.
    ``metrics={"max_data_points": n}`` records BullMQ's per-minute completed/failed
    counts (``Queue.get_metrics``). ``group``: run in a ``WorkerGroup``'s shared
    threads (with the group's connection) rather than threads of its own.

    ``processes=N``: each handler runs in one of ``N`` child processes (CPU-bound jobs use
    ``N`` cores); ``processor`` is then an import name ``"module:function"``, a top-level
    function, or a mapping of those; ``concurrency`` defaults to ``N``; ``job_timeout``
    (seconds) kills and fails a job that runs longer; ``max_jobs_per_process`` replaces a
    child after that many jobs. See docs/processes.md.

    ``processor=None``: manual processing, ``get_next_job(token)``. BullMQ's options
    ``max_started_attempts`` (a job started more often fails at once), ``skip_lock_renewal``,
    ``lock_renew_time`` (locks renewed every half of it; default ``lock_duration / 2``)
    and ``maximum_rate_limit_delay`` (the longest wait while rate limited), durations in
    seconds. Running jobs can be cancelled (``cancel_job``), cooperatively: see
    ``job.cancellation``. All in docs/manual.md.
    """

    def __init__(self, name: str, processor: Optional[ProcessorLike],
                 connection: ConnectionLike = None, *,
                 concurrency: Optional[int] = None, prefix: str = "bull", lock_duration: Seconds = 30.0,
                 stalled_interval: Seconds = 30.0, max_stalled_count: int = 1,
                 drain_delay: Seconds = 5.0, limiter: Optional[Mapping[str, Any]] = None,
                 remove_on_complete: Any = None, remove_on_fail: Any = None,
                 backoff_strategies: Optional[Dict[str, BackoffStrategy]] = None,
                 worker_name: Optional[str] = None, autorun: bool = False,
                 skip_stalled_check: bool = False, max_reconnect_delay: Seconds = 5.0,
                 metrics: Optional[Mapping[str, Any]] = None,
                 group: Optional["WorkerGroup"] = None, processes: Optional[int] = None,
                 job_timeout: Optional[Seconds] = None,
                 max_jobs_per_process: Optional[int] = None,
                 max_started_attempts: Optional[int] = None, skip_lock_renewal: bool = False,
                 lock_renew_time: Optional[Seconds] = None,
                 maximum_rate_limit_delay: Seconds = 30.0) -> None:
        self.processor = no_processor if processor is None else as_processor(processor)
        if processor is None and (processes is not None or group is not None
                                  or check.boolean(autorun, "autorun")):
            check.bad_value("processor", processor, "is needed with processes=, group= and "
                            "autorun=True (a worker without one is processed manually)")
        self.keys = QueueKeys(prefix, name)
        self.name = name
        self.concurrency, self.process_options = process_options(
            processes, concurrency, job_timeout, max_jobs_per_process)
        self.max_stalled_count = check.integer(max_stalled_count, "max_stalled_count", minimum=0)
        self.lock_duration_ms = positive_ms(lock_duration, "lock_duration")
        self.stalled_interval = positive_ms(stalled_interval, "stalled_interval") / 1000.0
        more = lock_and_start_options(self.lock_duration_ms, max_started_attempts,
                                      skip_lock_renewal, lock_renew_time, maximum_rate_limit_delay)
        self.max_started_attempts, self.skip_lock_renewal = more.max_started_attempts, \
            more.skip_lock_renewal
        self.lock_renew_time = more.lock_renew_time
        self.maximum_rate_limit_delay = more.maximum_rate_limit_delay
        self.drain_delay = float(check.seconds(drain_delay, "drain_delay", allow_none=False,
                                               maximum=MAX_BLOCK))
        self.max_reconnect_delay = float(check.seconds(max_reconnect_delay, "max_reconnect_delay",
                                                       allow_none=False, maximum=MAX_BLOCK))
        if self.max_reconnect_delay <= 0:
            check.bad_value("max_reconnect_delay", max_reconnect_delay, "must be > 0 seconds")
        self.lock_retry_interval = lock_retry_interval(self.lock_duration_ms / 1000.0)
        self.limiter = limiter_option(limiter)
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
        self.group = group
        if group is not None:
            connection = group._connection_for(connection)
        self.connection = as_connection(connection)
        self._owns_connection = self.connection is not connection
        self.client = self.connection.client
        self.queue = Queue(name, connection=self.connection, prefix=prefix)
        self.scripts = self.queue.scripts       # one script registry per connection user
        self._children: Optional[ChildPool] = None      # process mode: made by start()
        self._processor_spec = processor if self.process_options else None
        if self.process_options:
            sendable(processor)         # refused now, not at start, when it cannot be sent
        self._runner = JobRunner(self)
        # Jobs come with their children's return values, read as they are taken (set by
        # the workflow provider, whose handlers always read them; see Job._children_values)
        self._fetch_children = False
        self._listeners: Dict[str, List[Callable[..., Any]]] = {e: [] for e in LISTENER_EVENTS}
        self._fetch_stop = threading.Event()    # no new job from now on (close)
        self._cv = threading.Condition()          # guards the fields below
        self._free = self.concurrency
        self._paused = False
        self._active: Dict[str, Job] = {}
        self._state = "new"      # new -> running -> closing -> closed; forked: see below
        self._engine: Optional[Engine] = None
        self._renewer = LockRenewer(self)
        self._drained = False    # "drained" is emitted once per emptying of the queue
        self._shutdown_requested = threading.Event()
        self._forked_from: Optional[int] = None
        fork.track(self)
        self._closer: Optional[threading.Thread] = None    # close() called from a handler
        self._manual = ManualTaker(self)
        if autorun:
            self.start()

    def _after_fork_in_child(self) -> None:
        """A forked child does not run (nor share) its parent's worker: a started copy
        becomes inert, ``start()`` refuses, ``close()`` only closes this process's
        connections. Its active jobs are the parent's: their locks are never renewed
        nor their outcomes written here. A never-started copy may start here, with an
        id (and so lock tokens) of its own: a sibling's stale write is then refused."""
        self.id = uuid.uuid4().hex
        self._runner = JobRunner(self)          # its token counter and lock start afresh
        self._cv = threading.Condition()
        self._fetch_stop = threading.Event()
        self._shutdown_requested = threading.Event()
        self._active = {}
        self._free = self.concurrency
        self._engine = None
        self._renewer = LockRenewer(self)
        self._children = None       # the parent's child processes stay the parent's
        self._manual = ManualTaker(self)
        if self._state in ("running", "closing"):
            self._state = "forked"
            self._forked_from = os.getppid()

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> "Worker":
        """Start the background threads and return; jobs are processed until close().
        Atomic: when Redis does not answer, ``errors.ConnectionError`` is raised and the
        worker is left as it was, startable (``run()`` waits for Redis instead). Emits
        ``ready``. A worker made without a processor does not start: see get_next_job."""
        if self.processor is no_processor:
            raise errors.InvalidStateError(
                f"worker {self.name!r} has no processor (processor=None): it never fetches by "
                f"itself; take jobs with get_next_job(token)")
        self._check_startable()
        self.connection.ping()
        with self._cv:
            self._check_startable()          # close() or another start() came meanwhile
            self._state = "running"
        try:
            self._start_children()
            self._engine = self._join_engine()
        except BaseException:
            self._close_children()
            with self._cv:
                self._state = "new"
            raise
        log.info("worker for queue %s started: %s, Redis %s", self.name,
                 describe(self.concurrency, self.process_options), self.connection.address,
                 extra={"queue": self.name, "worker": self.id})
        self._emit("ready")
        return self

    def _start_children(self) -> None:
        """Process mode: the child processes start (importing the handler meanwhile)."""
        if self.process_options is None or self._processor_spec is None:
            return
        self._children = child_pool(self._processor_spec, self.process_options,
                                    self.connection, self.keys.prefix, self.name)
        self._children.start()
        self.processor = self._children.run

    def _close_children(self) -> None:
        children, self._children = self._children, None
        if children is not None:
            children.close()

    def _join_engine(self) -> Engine:
        if self.group is not None:
            return self.group._join(self)
        engine = Engine(self.connection, label=self.name, max_threads=self.concurrency,
                        anchor_key=self.keys.marker, longest_block=self.drain_delay,
                        client_name=self.client_name)
        engine.add(self)
        return engine

    def _check_startable(self) -> None:
        if self._state == "forked":
            raise errors.InvalidStateError(
                f"worker {self.name!r} was started in process {self._forked_from}, which "
                f"forked this one; a child does not run its parent's worker: create a new "
                f"Worker here (after the fork)")
        if self._state != "new":
            raise errors.InvalidStateError(f"worker is {self._state}; a worker starts once")

    def close(self, timeout: Optional[float] = None) -> bool:
        """Stop fetching, let active jobs finish (up to ``timeout`` seconds), join every
        thread. Idempotent. Returns False if active jobs were still running at the timeout
        (their locks are no longer renewed: another worker takes them over when they stall).

        From inside one of this worker's handlers, close() cannot wait for the calling job:
        it stops fetching and returns False at once; a closer thread finishes closing
        (the calling job's outcome written first) once the handler returns. From one of
        its listeners, it waits for every job but those whose listeners the calling thread
        runs, and joins every thread but the calling one, which ends once it returns."""
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
        self._emit("closing", "closing queue")
        self._shutdown_requested.set()
        self._close_manual(timeout)
        deadline = deadline_of(timeout)
        engine = self._engine
        if engine is not None:
            engine.changed(self, by_redis=False)   # the fetcher stops fetching this queue
        drained = self._wait_idle(remaining(deadline))
        if not drained and self._children is not None:
            self._children.kill_busy()      # their jobs go back to wait
            drained = self._wait_idle(self.lock_duration_ms / 1000.0)
        if engine is not None:
            engine.remove(self, drained, deadline)
        self._close_children()
        if self.group is not None:
            self.group._left(self)
        if self._owns_connection and drained:
            self.connection.close()
        with self._cv:
            self._state = "closed"
            self._cv.notify_all()
        log.info("worker for queue %s closed%s", self.name, "" if drained else
                 ": jobs still ran at its timeout (left to the stalled checker)",
                 extra={"queue": self.name, "worker": self.id})
        self._emit("closed")
        return drained

    def _wait_idle(self, timeout: Optional[float]) -> bool:
        """Wait until no job runs but those the calling thread runs or writes (close() or
        pause() from a handler or a listener must not wait for its own job)."""
        own = held_here(self)
        with self._cv:
            return self._cv.wait_for(lambda: self._active.keys() <= own and
                                     self._free + len(self._active) >= self.concurrency,
                                     timeout)

    def _wait_closed(self, timeout: Optional[float]) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: self._state == "closed", timeout)

    def __enter__(self) -> "Worker":
        if self._state == "new" and self.processor is not no_processor:   # manual: no start
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_running(self) -> bool:
        """Whether the worker is started and not yet closing."""
        return self._state == "running"

    # -- local pause -------------------------------------------------------
    def pause(self, wait: bool = True, timeout: Optional[float] = None) -> None:
        """Stop taking new jobs in this worker; with ``wait``, until active jobs finish
        (from a handler or a listener: all but the calling thread's own)."""
        check.boolean(wait, "wait")
        timeout = wait_timeout(timeout)
        with self._cv:
            was, self._paused = self._paused, True
        self._tell_engine(by_redis=False)     # a pause does not wait on Redis
        if wait:
            self._wait_idle(timeout)
        if not was:
            self._emit("paused")

    def resume(self) -> None:
        """Take jobs again after ``pause()`` (emits ``resumed`` when it was paused)."""
        with self._cv:
            was, self._paused = self._paused, False
            self._cv.notify_all()
        self._tell_engine()
        if was:
            self._emit("resumed")

    @property
    def is_paused(self) -> bool:
        """Whether this worker is paused locally (``pause()``)."""
        return self._paused

    # -- slots and dispatch (the engine's fetcher thread) ------------------
    @property
    def _finisher(self) -> Any:
        assert self._engine is not None
        return self._engine.finisher

    def _tell_engine(self, *, by_redis: bool = True) -> None:
        engine = self._engine
        if engine is not None:
            engine.changed(self, by_redis=by_redis)

    def _look_again(self) -> None:
        """The fetcher looks at this queue now, without a call to Redis to wake it: a
        take whose reply may be lost is taken back by that look (see ``LostTakes``)."""
        engine = self._engine
        if engine is not None:
            engine.set_due(self, time.monotonic())
            self._tell_engine(by_redis=False)

    def _can_fetch(self) -> bool:
        """It may take a job now (the engine then also waits on its queue's marker)."""
        return not self._stop_fetching() and not self._paused and self._free > 0

    def _take_slots(self, wanted: Optional[int] = None) -> int:
        """Slots (and engine threads) for the jobs of one fetch, all free ones or up to
        ``wanted``; 0 when none may run."""
        engine = self._engine
        with self._cv:
            if engine is None or not self._can_fetch():
                return 0
            taken = engine.take_threads(self._free if wanted is None else
                                        min(wanted, self._free))
            self._free -= taken
            return taken

    def _stop_fetching(self) -> bool:
        return self._state != "running" or self._fetch_stop.is_set()

    def _give_back_slots(self, count: int, tell: bool = True) -> None:
        """``count`` slots (and their engine threads) are free again. The engine is told
        (unless the fetcher itself gives them back) only when this makes a difference to
        it: the worker had no free slot, or the engine no free thread."""
        if not count:
            return
        engine = self._engine
        with self._cv:
            was_full = self._free == 0
            self._free += count
            starved = engine is not None and engine.give_threads(count)
            self._cv.notify_all()
        if tell and (was_full or starved):
            self._tell_engine()

    def _move_to_active(self, count: int) -> "tuple[List[Job], int, int]":
        keys, args, opts = self._fetch_call(count)
        try:
            reply = self._run_hot_script("moveToActive", keys, args)
        except errors.OrijsError:      # it may have run, its reply lost: see LostTakes
            self._runner.lost.failed(opts, count)
            raise
        return self._fetch_reply(reply)

    def _fetch_call(self, count: int, token: Optional[str] = None,
                    ) -> "tuple[List[str], List[Any], Dict[str, Any]]":
        """Keys, arguments and take options of the moveToActive call taking up to
        ``count`` jobs (with ``token``: one, locked with it)."""
        k = self.keys
        opts = self._runner.fetch_opts(count, token)
        return ([k.wait, k.active, k.marker], [k.base, now_ms(), script_json(opts), count], opts)

    def _fetch_reply(self, reply: Any) -> "tuple[List[Job], int, int]":
        jobs_raw, ttl, next_delayed = reply
        jobs = [self._job_from_reply(*job) for job in jobs_raw]
        return jobs, int(ttl), int(next_delayed)

    def _run_hot_script(self, name: str, keys: List[str], args: List[Any]) -> Any:
        """The per-job scripts, on the calling worker thread's own connection (through
        the cluster client on a cluster, which picks the node owning the queue)."""
        if self.connection.is_cluster:
            return self.scripts.run(name, keys, args)
        return self.scripts.run_direct(self.connection.direct_connection(), name, keys, args,
                                       self.connection.address)

    def _job_from_reply(self, fields: List[str], job_id: str, token: str,
                        children: Optional[List[str]] = None) -> Job:
        """A job as a fetching script returns it (its hash's fields, id, lock token and,
        when this worker asks for them, its processed children as a flat list). Its hash
        is decoded by the pool thread that runs it (``_run``): the thread that took it
        (the fetcher, the finisher) goes back to Redis sooner."""
        job = Job._shell(self.queue, str(job_id))
        job._unread = fields
        job.token = token
        if self._fetch_children and children is not None:
            job._fetched_children = dict(zip(children[::2], children[1::2]))
        job._lock_until = time.monotonic() + self.lock_duration_ms / 1000.0
        job._worker = self
        return job

    def _dispatch(self, job: Job) -> None:
        assert self._engine is not None
        with self._cv:
            self._active[job.id] = job   # counted before the thread starts: close() waits for it
        self._engine.executor.submit(self._run, job)

    def _handed(self, taken: List[Any]) -> None:
        """A Queue of this process took a job for this worker (``taken``: none or one,
        as moveToActive returns them) in its add's call, a slot reserved for it first
        (see ``engine.local``). A job that cannot be run here now (the worker closed
        meanwhile) stays active in Redis: the stalled checker takes it back."""
        try:
            job = self._job_from_reply(*taken[0]) if taken else None
        except Exception:  # noqa: BLE001 - a reply it cannot read: the job stalls
            log.exception("worker %s: a job handed by an add could not be read", self.name)
            job = None
        if job is None:
            self._give_back_slots(1)
            return
        self._drained = False      # the fetcher's next empty look says "drained" again
        try:
            self._dispatch(job)
        except RuntimeError:     # the handler pool is shut down
            self._let_go_unrun(job)

    def _let_go_unrun(self, job: Job) -> None:
        """A job taken for this worker after it closed: it stalls (stays active)."""
        log.warning("worker %s closed before job %s taken for it ran; it stalls and goes "
                    "back to wait", self.name, job.id)
        self._let_go([job])
        self._give_back_slots(1)

    def _run(self, job: Optional[Job]) -> None:
        """Pool thread: run jobs one after another, each by its own worker (the call
        writing one may take the next job of this queue, or the parent it made ready
        in another queue of the engine)."""
        while job is not None:
            job = job._worker._run_one(job)

    def _run_one(self, job: Job) -> Optional[Job]:
        """Run the handler; the outcome goes to the finisher, which keeps the job's slot
        for the next job it takes. A lone job's outcome is written here, and the next
        job that call took is returned, to run on this thread. A job moved otherwise
        (retried, delayed...) frees its slot."""
        outcome = None
        _handling.worker = self       # close() from the handler must not wait for it
        HELD.jobs = (job,)            # nor pause()
        try:
            job._read_taken()
            outcome = self._runner.process(job)
        except Exception:  # noqa: BLE001 - e.g. Redis down while retrying: the job will stall
            log.exception("worker %s: unexpected error while processing job %s",
                          self.name, job.id)
        finally:
            _handling.worker = None
            HELD.jobs = ()
        if outcome is None:
            self._let_go([job])
            self._give_back_slots(1)
            return None
        with self._cv:
            alone = len(self._active) == 1
        if self._finisher.submit(outcome, alone):
            return None
        try:
            return self._finisher.write([outcome], keep_one=True)  # type: ignore[no-any-return]
        except Exception:  # noqa: BLE001 - kept by the finisher, written on its next try
            log.warning("worker %s: writing job %s failed; the finisher retries it (for one "
                        "lock duration)", self.name, outcome.job.id, exc_info=True)
            return None

    def _after_finish(self, batch: List[Outcome], next_jobs: List[Job],
                      keep_one: bool = False) -> Optional[Job]:
        """The batch is written; its slots go to the next jobs, the rest are freed. The
        next jobs go to the pool, but for the first one when ``keep_one``: it is returned.
        A job taken for another worker (a parent: see JobRunner.finish) came with a
        slot of its own, reserved by the caller."""
        own = [job for job in next_jobs if job._worker is self]
        with self._cv:
            for outcome in batch:
                self._forget(outcome.job)
            for job in own:
                self._active[job.id] = job
        for job in next_jobs:
            if job._worker is not self:
                with job._worker._cv:
                    job._worker._active[job.id] = job
        LOCAL.released(self.connection, self.keys.marker, [o.job.id for o in batch])
        self._give_back_slots(len(batch) - len(own))
        runnable = [job for job in next_jobs if job._worker._state != "closed"]
        for job in next_jobs:      # its worker closed from a listener of this batch
            if job not in runnable:
                job._worker._let_go_unrun(job)
        kept = runnable.pop(0) if keep_one and runnable else None
        assert self._engine is not None
        for job in runnable:
            self._engine.executor.submit(self._run, job)
        return kept

    def _set_finishing(self, batch: List[Outcome], finishing: bool) -> None:
        with self._cv:
            for outcome in batch:
                outcome.job._finishing = finishing

    def _forget(self, job: Job) -> None:
        """Under ``_cv``: the job no longer needs its lock renewed. The caller then
        tells ``LOCAL.released`` (after the jobs taken in its place are active)."""
        if self._active.get(job.id) is job:
            del self._active[job.id]

    def _let_go(self, jobs: List[Job]) -> None:
        with self._cv:
            for job in jobs:
                self._forget(job)
        LOCAL.released(self.connection, self.keys.marker, [job.id for job in jobs])

    def _holds(self, job_id: str) -> bool:
        """The job is active here: its outcome is this worker's to write (see _local)."""
        with self._cv:
            return job_id in self._active

    def _fetch_next_allowed(self) -> bool:
        return self._state == "running" and not self._paused and not self._fetch_stop.is_set()

