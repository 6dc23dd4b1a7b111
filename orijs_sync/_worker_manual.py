"""Manual processing (BullMQ's "manually processing jobs"): a Worker made without a
processor (``processor=None``) never fetches by itself; the caller takes one job at a
time with ``worker.get_next_job(token)``, locked with a token of its own, and moves it
with ``job.move_to_completed`` / ``move_to_failed`` / ``move_to_delayed`` /
``move_to_wait`` (``orijs_sync._job_manual``).

As in BullMQ, such a job's lock is not renewed by the worker: the caller renews it
(``job.extend_lock(token, seconds)``) when its work may outlast ``lock_duration``. The
stalled checks still apply: a job whose lock expires is moved back to wait (or failed,
past ``max_stalled_count``) by the stalled check of any worker of the queue, Node's
included; this worker runs one once ``start_stalled_check_timer()`` is called.

Also here: the stalled check every Worker sends (the engine's checker, or the manual
worker's timer thread).
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from . import errors
from ._job_manual import raise_for_code
from .base import validate as check
from .base.roles import Periodic
from .base.util import Seconds, dumps, now_ms
from .engine.engine_roles import pop_marker
from .engine.local import LOCAL
from .engine.processing import Outcome, unrecoverable
from .job_scheduler import schedule_next

if TYPE_CHECKING:  # pragma: no cover
    from .job import Job
    from .worker import Worker

log = logging.getLogger("orijs_sync.worker")

LONGEST_BLOCK = 10.0     # one BZPOPMIN at most (BullMQ's bound too); the take looks again


def no_processor(job: "Job") -> Any:
    """The processor of a manual worker: never called (it never fetches by itself)."""
    raise errors.InvalidStateError("a Worker made with processor=None runs no handler")


class ManualMixin:
    """Mixed into ``orijs_sync.worker.Worker``: the public calls, each done by its
    ``ManualTaker`` (``_manual``)."""

    _manual: "ManualTaker"

    def get_next_job(self, token: str, block: bool = True,
                     timeout: Optional[Seconds] = None) -> Optional["Job"]:
        """Take the next job, locked with ``token`` (BullMQ's ``worker.getNextJob``), for
        a Worker made with ``processor=None``. With ``block``, wait up to ``timeout``
        seconds (default ``drain_delay``) for one; None when none came, or the worker
        is paused or closing. A job started more than ``max_started_attempts`` times, or
        one that stalled too often, is failed (``failed`` event) and the next one taken.
        Emits ``active`` for the job taken, ``drained`` when the queue is found empty.

        The job's lock lasts ``lock_duration`` and is not renewed: call
        ``job.extend_lock(token, seconds)``; finish it with ``job.move_to_completed`` or
        ``job.move_to_failed`` (see docs/manual.md)."""
        check.string(token, "token")
        check.boolean(block, "block")
        wait = check.seconds(timeout, "timeout")
        self._manual.check("get_next_job")
        return self._manual.next_job(token, block, wait)

    def start_stalled_check_timer(self) -> None:
        """Run the stalled check every ``stalled_interval`` from now on, on a thread that
        ``close()`` stops (BullMQ's ``worker.startStalledCheckTimer``), for a Worker made
        with ``processor=None`` (one with a processor runs it once started).
        Idempotent; does nothing with ``skip_stalled_check``."""
        self._manual.check("start_stalled_check_timer")
        self._manual.start_timer()

    def _finish_manually(self, job: "Job", target: str, result: Any, token: str,
                         fetch_next: bool) -> Optional["Job"]:
        return self._manual.finish(job, target, result, token, fetch_next)

    def _close_manual(self, timeout: Optional[float]) -> None:
        self._manual.close(timeout)

    # the stalled check every Worker sends (the engine's checker, or the manual timer)
    def _check_stalled(self) -> None:
        self._manual.check_stalled()

    def _stalled_call(self) -> "tuple[str, List[str], List[Any]]":
        return self._manual.stalled_call()

    def _stalled_done(self, moved: List[str]) -> None:
        self._manual.stalled_done(moved)


class ManualTaker:
    """A Worker's manual side: taking and finishing jobs for a caller, its blocking
    connection (one blocked look at a time, under ``block_lock``), the stalled check
    timer, and whether it said ``ready``. Any thread may call it."""

    def __init__(self, worker: "Worker") -> None:
        self.w = worker
        self.lock = threading.Lock()          # guards blocking, timer, ready
        self.block_lock = threading.Lock()    # held by the one thread blocked on the marker
        self.calls_cv = threading.Condition()     # guards calls: get_next_job calls under way
        self.calls = 0
        self.blocking: Any = None
        self.timer: Optional[Periodic] = None
        self.ready = False
        self.wake_key = f"{worker.keys.marker}:orijs-wake:{uuid.uuid4().hex}"  # never pushed

    def check(self, action: str) -> None:
        if self.w.processor is not no_processor:
            raise errors.InvalidStateError(
                f"{action}() is for a Worker made with processor=None (manual processing); "
                f"worker {self.w.name!r} has a processor and takes its jobs itself")

    def may_take(self) -> bool:
        w = self.w
        return w._state == "new" and not w._paused and not w._fetch_stop.is_set()

    # -- taking ----------------------------------------------------------------------
    def next_job(self, token: str, block: bool, wait: Optional[float]) -> Optional["Job"]:
        """A job, or None; counted as under way (``close()`` waits for it before closing
        the connections). A connection error once the worker is closing (the take cut
        short by ``close()``) gives None, as a take after ``close()`` does."""
        with self.calls_cv:
            self.calls += 1
        try:
            return self._next_job(token, block, wait)
        except errors.ConnectionError:
            if self.w._fetch_stop.is_set():
                return None
            raise
        finally:
            with self.calls_cv:
                self.calls -= 1
                self.calls_cv.notify_all()

    def _next_job(self, token: str, block: bool, wait: Optional[float]) -> Optional["Job"]:
        deadline = time.monotonic() + (self.w.drain_delay if wait is None else wait)
        while self.may_take():
            job, ttl, next_delayed = self.take_one(token)
            if job is not None:
                job = self.accept(job, token)
                if job is not None:
                    return job
                continue
            pause = self.pause_for(ttl, next_delayed, deadline - time.monotonic())
            if not block or pause <= 0:
                return None
            if ttl:
                self.w._fetch_stop.wait(pause)         # rate limited: look again after
            else:
                self.wait_for_marker(pause)
        return None

    def take_one(self, token: str) -> Tuple[Optional["Job"], int, int]:
        """One moveToActive call taking at most one job, locked with ``token``."""
        w = self.w
        keys, args, _ = w._fetch_call(1, token)
        jobs, ttl, next_delayed = w._fetch_reply(w.scripts.run("moveToActive", keys, args))
        self.said_ready()
        if jobs:
            w._drained = False
            return jobs[0], ttl, next_delayed
        with w._cv:
            drained = not w._drained and not ttl
            w._drained = w._drained or not ttl
        if drained:
            w._emit("drained")
        return None, ttl, next_delayed

    def said_ready(self) -> None:
        with self.lock:
            first, self.ready = not self.ready, True
        if first:
            self.w._emit("ready")

    def pause_for(self, ttl: int, next_delayed: int, left: float) -> float:
        """How long to wait before looking again: a rate limit's ttl (at most
        ``maximum_rate_limit_delay``), the next delayed job, or what is left."""
        if ttl:
            return min(ttl / 1000.0, self.w.maximum_rate_limit_delay, left)
        if next_delayed:
            return min(max(next_delayed - now_ms(), 1) / 1000.0, left)
        return left

    def wait_for_marker(self, seconds: float) -> None:
        """Block on the queue's marker (one thread at a time; the others wait for it)."""
        if not self.block_lock.acquire(timeout=seconds):
            return
        try:
            with self.lock:
                if self.w._fetch_stop.is_set():
                    return
                if self.blocking is None:
                    self.blocking = self.w.connection.blocking_client(LONGEST_BLOCK,
                                                                      self.w.client_name)
                blocking = self.blocking
            pop_marker(blocking, [self.w.keys.marker], self.wake_key,
                       min(seconds, LONGEST_BLOCK), lambda: None)
        finally:
            self.block_lock.release()

    def accept(self, job: "Job", token: str) -> Optional["Job"]:
        """A job just taken: returned to the caller (``active`` emitted), or failed at
        once (None) when it must not run (BullMQ's ``getNextJob`` does the same)."""
        w = self.w
        job._read_taken()
        if not job.problem:
            schedule_next(job)       # a scheduler's run: the next one, as a worker does
        w._emit("active", job)
        refused = job.problem or unrecoverable(w, job)
        if not refused:
            return job
        exc = errors.UnrecoverableError(refused)
        self.finish(job, "failed", exc, token, False)
        w._emit("failed", job, exc)
        return None

    # -- finishing (job.move_to_completed / move_to_failed) ------------------------
    def finish(self, job: "Job", target: str, result: Any, token: str,
               fetch_next: bool) -> Optional["Job"]:
        """Write one outcome of a job locked with ``token``; the next job when asked."""
        w = self.w
        if target == "completed":
            outcome: Optional[Outcome] = Outcome(
                job, "completed", dumps(result, "return_value"), result=result)
        else:
            outcome = self.failure(job, result, token)
        if outcome is None:          # retried: back to wait, or delayed
            job._moved = True
            return self.next_job(token, False, None) if fetch_next else None
        fetch = 1 if fetch_next and self.may_take() else 0
        call = w._runner.finish_call([outcome], fetch, token=token)
        codes, jobs = w.scripts.run("moveToFinished", call.keys, call.args)[:2]
        raise_for_code(job.id, codes[0], f"move to {target}")
        job._moved = True
        if isinstance(codes[0], str):      # its event's id: waiters here settle now
            LOCAL.finished(w.connection, w.keys.events, codes[0], outcome.event)
        job.attempts_made += 1
        job.finished_on = call.stamp
        if target == "completed":
            job.returnvalue = result
        if not jobs:
            return None
        taken = self.accept(w._job_from_reply(*jobs[0]), token)
        return taken if taken is not None else self.next_job(token, False, None)

    def failure(self, job: "Job", exc: BaseException, token: str) -> Optional[Outcome]:
        """A failed attempt: retried now (None), as a handler's failure is (attempts,
        backoff, ``discard()``), or the outcome failing the job for good."""
        runner = self.w._runner
        delay, exc, fields = runner.failure_plan(job, exc)
        if delay is None:
            return Outcome(job, "failed", fields[1], fields, exc)
        code = self.w.scripts.run(*runner.retry_call(job, delay, fields, token))
        raise_for_code(job.id, code, "retry")
        job.attempts_made += 1
        return None

    # -- the stalled check timer, closing --------------------------------------------
    def start_timer(self) -> None:
        w = self.w
        with self.lock:
            if self.timer is not None or w.skip_stalled_check or w._fetch_stop.is_set():
                return
            timer = self.timer = Periodic(w._fetch_stop, "stalled-checker", w.stalled_interval,
                                          self.check_stalled)
        timer.on_error = lambda exc: w._emit("error", exc)  # type: ignore[method-assign]
        timer.probe = w.connection.ping
        timer.start(f"orijs-stalled-checker-{w.name}")

    def close(self, timeout: Optional[float]) -> None:
        """Stop the stalled check timer; wait (up to a second, or ``timeout``) for the
        ``get_next_job`` calls under way to return, cutting a blocked one short (the
        worker's stop event is set: they return None); then close the blocking
        connection. A take is never cut off by the worker's connections closing."""
        with self.lock:
            blocking, timer = self.blocking, self.timer
        until = time.monotonic() + (1.0 if timeout is None else min(timeout, 1.0))
        with self.calls_cv:
            while self.calls and time.monotonic() < until:
                if blocking is not None:     # again: a BZPOPMIN may be sent just after one
                    blocking.interrupt()
                self.calls_cv.wait(0.05)
        if blocking is not None:
            blocking.close()
        if timer is not None:
            timer.stop(None if timeout is None else time.monotonic() + timeout)

    # -- the stalled check every Worker sends --------------------------------------
    def check_stalled(self) -> None:
        self.stalled_done(self.w.scripts.run(*self.stalled_call()))

    def stalled_call(self) -> "tuple[str, List[str], List[Any]]":
        """The stalled check to send (the engine's checker sends many in one pipeline)."""
        w, k = self.w, self.w.keys
        return ("moveStalledJobsToWait",
                [k.stalled, k.wait, k.active, k.stalled_check, k.meta, k.paused, k.marker,
                 k.events, k.repeat],
                [w.max_stalled_count, k.base, now_ms(), int(w.stalled_interval * 1000)])

    def stalled_done(self, moved: List[str]) -> None:
        for job_id in moved:
            log.info("worker %s: job %s stalled and went back to wait", self.w.name, job_id)
            self.w._emit("stalled", job_id)
