"""What a worker does with its jobs: run the handler and turn the result into an
``Outcome``; outcomes are then written many at a time, in one script call
that also takes the next jobs (see ``Worker``'s finisher)."""
from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, cast

import redis

from .. import errors
from ..base import validate as check
from ..base.util import Counter, dumps, now_ms, script_json, well_formed
from ..job import Job
from ..job_scheduler import schedule_next
from ..options import keep_jobs
from .children import trace_text
from .job_log import WORKER_LOG, job_extra, log_completed, log_failure
from .local import LOCAL
from .locks import write_through_blip
from .lost_takes import LostTakes

if TYPE_CHECKING:  # pragma: no cover
    from ..worker import Worker

log = logging.getLogger(__name__)

# The longest retry delay (ten years, as the longest delay an add accepts): an
# exponential backoff grows past any score Redis can store.
MAX_BACKOFF_MS = int(check.MAX_SECONDS * 1000)

BackoffStrategy = Callable[[int, BaseException, Job], Optional[float]]

# The jobs the calling thread runs or writes (``.jobs``, a tuple): close() and pause()
# called from that thread (a handler, a listener) do not wait for them (see held_here).
HELD = threading.local()


def held_here(worker: "Worker") -> Set[str]:
    """The ids of ``worker``'s jobs whose handler or listeners the calling thread runs."""
    return {job.id for job in getattr(HELD, "jobs", ()) if job._worker is worker}


LOCK_ERRORS = {-1: "the job no longer exists", -2: "its lock had expired",
               -3: "it was no longer active", -4: "it still has pending children",
               -6: "its lock is held by another worker", -9: "a child of it failed"}


STARTED_TOO_OFTEN = "job started more than allowable limit"     # BullMQ's reason


def unrecoverable(worker: "Worker", job: Job) -> Optional[str]:
    """Why a job just taken must fail at once, without running (BullMQ's
    ``getUnrecoverableErrorMessage``): a deferred failure (it stalled too often), or it
    was started more than the worker's ``max_started_attempts``; else None."""
    if job.deferred_failure:
        return job.deferred_failure
    limit = worker.max_started_attempts
    if limit and limit < job.attempts_started:
        return STARTED_TOO_OFTEN
    return None


def compute_backoff(backoff: Any, attempts_made: int, exc: BaseException, job: Job,
                    strategies: Dict[str, BackoffStrategy]) -> Optional[int]:
    """Delay in ms before the next attempt; ``None`` means "do not retry"."""
    if not backoff:
        return 0
    if not isinstance(backoff, dict):       # a stored number: BullMQ's fixed delay
        backoff = {"type": "fixed", "delay": backoff}
    kind = backoff.get("type")
    delay = float(backoff.get("delay") or 0)
    if kind == "fixed":
        ms = delay
    elif kind == "exponential":
        ms = 2.0 ** min(attempts_made - 1, 1023) * delay
    elif kind in strategies:
        seconds = strategies[kind](attempts_made, exc, job)
        if seconds is None or not seconds >= 0:     # nan too
            return None
        return _bounded_ms(seconds * 1000)
    else:
        raise errors.OrijsError(f"unknown backoff strategy {kind!r}; register it with "
                                f"Worker(backoff_strategies={{{kind!r}: fn}})")
    jitter = backoff.get("jitter")
    if jitter:
        ms = ms * (1 - random.random() * float(jitter))
    return _bounded_ms(ms)


def _bounded_ms(ms: float) -> int:
    """A delay Redis can store: an exponential backoff outgrows any score (inf)."""
    return int(round(max(-MAX_BACKOFF_MS, min(ms, MAX_BACKOFF_MS))))


def error_fields(job: Job, exc: BaseException) -> Tuple[str, List[str]]:
    """BullMQ's failedReason and the stacktrace list, trimmed to stackTraceLimit."""
    reason = well_formed(str(exc) or type(exc).__name__)
    trace = trace_text(exc)              # process mode: the child's
    stored = job.opts.get("stackTraceLimit")
    limit = 10 if stored is None else int(stored)       # null (JSON) as unset
    stack = (job.stacktrace + [trace])[-limit:] if limit else []
    return reason, stack


@dataclass
class Outcome:
    """A finished attempt waiting to be written: completed, or failed for good."""

    job: Job
    target: str                    # "completed" | "failed"
    value: str                     # the returnvalue's JSON text, or the failedReason
    fields: List[str] = field(default_factory=list)   # extra job fields (stacktrace...)
    result: Any = None             # the Python return value, or the exception
    made: float = field(default_factory=time.monotonic)   # when the handler returned

    @property
    def give_up_at(self) -> float:
        """Until when (monotonic) its write is retried: one lock duration after its
        handler returned. Then the job is left to stall recovery (see ``Finisher``)."""
        return self.made + float(self.job._worker.lock_duration_ms) / 1000.0

    def event(self) -> Dict[str, str]:
        """The fields of the event its write adds to the events stream."""
        field = "returnvalue" if self.target == "completed" else "failedReason"
        return {"event": self.target, "jobId": self.job.id, field: self.value, "prev": "active"}


class JobRunner:
    """Runs jobs for one worker; thread-safe (each call works on its own jobs)."""

    def __init__(self, worker: "Worker") -> None:
        self.w = worker
        self.keys = worker.keys
        self._tokens = Counter()
        self.lost = LostTakes()        # token ranges of takes whose reply may be lost

    def run_script(self, name: str, keys: List[str], args: List[Any],
                   until: Optional[float] = None) -> Any:
        """Run a finishing script through a Redis blip (``write_through_blip``) for up to
        one lock duration, or until the monotonic ``until`` if sooner, while the lock
        renewer keeps the job's lock."""
        return write_through_blip(lambda: self.w._run_hot_script(name, keys, args),
                                  self.w.lock_duration_ms / 1000.0, until)

    def fetch_opts(self, count: int, token: Optional[str] = None) -> Dict[str, Any]:
        """Options of the scripts that take jobs. Lock tokens are BullMQ's form,
        ``{worker id}:{n}``: this reserves ``count`` numbers from ``tokenStart``, and the
        script makes the token of each job it takes (a take of one job out of 16 asked
        for no longer sends, and decodes, 16 tokens). ``token``: the caller's own, for
        the one job a manual take takes (``Worker.get_next_job``)."""
        opts: Dict[str, Any] = {"lockDuration": self.w.lock_duration_ms}
        if token is None:
            opts.update(tokenBase=f"{self.w.id}:", tokenStart=self._tokens.take(count))
            self.lost.include(opts, count)
        else:
            opts["fixedToken"] = token
        if self.w.limiter:
            opts["limiter"] = self.w.limiter
        if self.w._held_back():       # a manual rate limit holds (see _worker_limits)
            opts["limited"] = 1
        if self.w.worker_name:
            opts["name"] = self.w.worker_name
        if self.w._fetch_children:
            opts["children"] = 1
        return opts

    # -- one job -----------------------------------------------------------
    def process(self, job: Job) -> Optional[Outcome]:
        """Run the handler. Returns the outcome to write, or None when the job was
        already moved (retried, delayed, waiting for children, rate limited)."""
        if job.problem:   # a hash that cannot be decoded never reaches the handler
            self.w._emit("active", job)
            return self.failure(job, errors.UnrecoverableError(job.problem))
        schedule_next(job)  # a scheduler's run: schedule the next one, as BullMQ workers do
        self.w._emit("active", job)
        refused = unrecoverable(self.w, job)
        if refused:
            return self.failure(job, errors.UnrecoverableError(refused))
        try:
            try:
                result = self.w.processor(job)
            finally:
                job._handler_done = True     # too late for cancel_job from now on
        except (errors.DelayedError, errors.WaitingChildrenError):
            return None
        except errors.RateLimitError:
            self.w._move_back_to_wait(job)
            return None
        except Exception as exc:  # noqa: BLE001 - handler errors become the job's failure
            return self.failure(job, exc)
        if job._moved:
            return None
        try:
            text = dumps(result, f"return value of job {job.id}")
        except TypeError as exc:
            return self.failure(job, errors.UnrecoverableError(str(exc)))
        return Outcome(job, "completed", text, result=result)

    def failure(self, job: Job, exc: BaseException) -> Optional[Outcome]:
        """A failed attempt: retried now (returns None) or failed for good (an Outcome)."""
        delay, exc, fields = self.failure_plan(job, exc)
        if delay is not None:
            self._retry(job, delay, fields)
            self.w._emit("failed", job, exc)
            return None
        return Outcome(job, "failed", fields[1], fields, exc)

    def failure_plan(self, job: Job, exc: BaseException,
                     ) -> Tuple[Optional[int], BaseException, List[str]]:
        """What a failed attempt becomes: the retry's delay in ms (None: failed for
        good), the error that fails it, and the job fields to write (failedReason,
        stacktrace; also set on ``job``)."""
        delay: Optional[int] = None
        if self._should_retry(job, exc):
            try:
                delay = compute_backoff(job.opts.get("backoff"), job.attempts_made + 1, exc, job,
                                        self.w.backoff_strategies)
            except Exception as backoff_exc:  # noqa: BLE001 - unknown or failing strategy
                exc = self._backoff_failed(job, exc, backoff_exc)
        reason, stack = error_fields(job, exc)
        job.failed_reason, job.stacktrace = reason, stack
        log_failure(WORKER_LOG, self.log_extra(job), exc, attempts=job.attempts,
                    retry_in_ms=delay)
        return delay, exc, ["failedReason", reason, "stacktrace", dumps(stack)]

    def log_extra(self, job: Job) -> Dict[str, Any]:
        return job_extra(self.w.name, job.id, job.name, job.attempts_made + 1,
                         self.w.worker_name or self.w.id)

    def _backoff_failed(self, job: Job, exc: BaseException,
                        backoff_exc: BaseException) -> BaseException:
        """No delay could be computed (a strategy this worker does not know, or one that
        raised): the job is to fail at once, its reason naming the strategy, rather than
        stay in active until stall recovery fails it as "stalled". (BullMQ emits
        ``error`` and leaves the job to stall; failing now gives the real reason.)"""
        backoff = job.opts.get("backoff")
        kind = backoff.get("type") if isinstance(backoff, dict) else "fixed"
        failure = errors.UnrecoverableError(
            f"backoff strategy {kind!r} failed: {backoff_exc} (the attempt failed with: "
            f"{str(exc) or type(exc).__name__})")
        failure.__cause__ = exc
        self.w._emit("error", backoff_exc)
        return failure

    @staticmethod
    def _should_retry(job: Job, exc: BaseException) -> bool:
        """Attempts are left, and neither the error nor ``job.discard()`` forbids one."""
        return (job.attempts_made + 1 < job.attempts and not job._discarded
                and not isinstance(exc, errors.UnrecoverableError))

    def retry_call(self, job: Job, delay_ms: int, fields: List[str],
                   token: Optional[str] = None) -> Tuple[str, List[str], List[Any]]:
        """The script call (name, keys, args) moving a failed attempt back to wait, or to
        delayed for ``delay_ms``; the lock held with ``token`` (default: the job's)."""
        k = self.keys
        token = job.token if token is None else token
        if delay_ms > 0:
            now = now_ms()
            return ("moveToDelayed", [job.key, k.active, k.events, k.stalled, k.meta],
                    [k.base, job.id, now, token, now + delay_ms, "0", script_json(fields)])
        return ("retryJob", [job.key, k.active, k.events, k.stalled],
                [k.base, job.id, now_ms(), token, script_json(fields)])

    def _retry(self, job: Job, delay_ms: int, fields: List[str]) -> None:
        self._check(job, self.run_script(*self.retry_call(job, delay_ms, fields)), "retry")

    # -- many jobs ---------------------------------------------------------
    def finish(self, outcomes: Sequence[Outcome], fetch: int,
               sent: Optional[Tuple["FinishCall", Any]] = None,
               parent: "Optional[Worker]" = None) -> List[Job]:
        """Write the outcomes in one script call that also takes up to ``fetch`` next
        jobs; emits completed/failed for each outcome written; returns the next jobs.
        ``parent``: a worker of another queue with a slot reserved for one job, taken
        by the same call if the outcome makes its job's parent ready there (that job,
        ``parent``'s, comes last in the list).
        An outcome Redis refuses (a script error, not a connection failure) does not hold
        back the others: the batch is written one by one and the refused one dropped.
        ``sent``: the call was already sent in a pipeline (the engine's finisher writing
        many queues at once), with this reply or error (None: no reply, sent again)."""
        try:
            return self._finish(outcomes, fetch, sent, parent)
        except (errors.ConnectionError, errors.PermissionDenied):
            raise      # Redis or the user is refused, not the job: kept and written later
        except errors.RedisError as exc:
            if _server_state(exc):
                raise
            return self._finish_apart(outcomes, exc)
        except Exception as exc:  # noqa: BLE001 - one bad job must not block the batch
            return self._finish_apart(outcomes, exc)

    def _finish_apart(self, outcomes: Sequence[Outcome], exc: BaseException) -> List[Job]:
        """The batch was refused: write its outcomes one by one, dropping only those
        refused on their own."""
        if len(outcomes) > 1:
            return [j for o in outcomes for j in self.finish([o], 0)]
        self._drop(outcomes[0], exc)
        return []

    def _drop(self, outcome: Outcome, exc: BaseException) -> None:
        """An outcome that cannot be written: left to the stalled checker (its lock
        expires), reported as an error."""
        job = outcome.job
        log.error("job %s of %s: writing its outcome (%s) failed: %s; the stalled checker "
                  "takes it over", job.id, self.keys.queue_key, outcome.target, exc)
        self.w._emit("error", errors.CorruptJob(
            f"job {job.id}: its outcome could not be written: {exc}", job.id))

    def finish_call(self, outcomes: Sequence[Outcome], fetch: int,
                    parent: "Optional[Worker]" = None, token: Optional[str] = None,
                    ) -> "FinishCall":
        """The moveToFinished call writing ``outcomes`` and taking up to ``fetch`` jobs
        (and one for ``parent``: see finish); ``token``: the lock token of a manual
        caller, held by the outcome's job and given to the next one."""
        k = self.keys
        opts = self._finish_opts(fetch, token, parent)
        engine = self.w._engine
        mark = engine.mark() if engine is not None and fetch else None
        stamp = now_ms()
        args: List[Any] = [k.base, stamp, fetch, script_json(opts), len(outcomes)]
        for o in outcomes:
            kept = o.job.opts.get("removeOnComplete" if o.target == "completed" else "removeOnFail")
            if kept is None:
                kept = self.w.remove_on_complete if o.target == "completed" else self.w.remove_on_fail
            args += [o.job.id, o.job.token if token is None else token, o.target, o.value,
                     script_json(o.fields), script_json(keep_jobs(kept)), o.job.attempts]
        return FinishCall([k.active, k.events, k.meta, k.stalled], args, stamp, fetch, mark,
                          opts, parent)

    def _finish_opts(self, fetch: int, token: Optional[str],
                     parent: "Optional[Worker]") -> Dict[str, Any]:
        opts = self.fetch_opts(fetch, token)
        if self.w.max_metrics_points:
            opts["maxMetricsSize"] = self.w.max_metrics_points
        if parent is not None:
            opts["parent"] = dict(parent._runner.fetch_opts(1), qk=parent.keys.base)
        return opts

    def _failed_try(self, call: "FinishCall") -> None:
        """A try of ``call`` failed: it may have run, its reply lost, with jobs taken for
        this worker (and the parent's): kept to be taken back (see ``LostTakes``)."""
        self.lost.failed(call.opts, call.fetch)
        if call.parent is not None:
            call.parent._runner.lost.failed(call.opts["parent"], 1)

    def _write(self, call: "FinishCall", until: float, failed_before: bool) -> Any:
        """Run ``call`` through a Redis blip (see ``run_script``). A try after a failed
        one takes new tokens and takes back what the failed one may have taken."""
        failed = [failed_before]
        if failed_before:
            self._failed_try(call)

        def attempt() -> Any:
            if failed[0]:
                call.opts = self._finish_opts(call.fetch, None, call.parent)
                call.args[3] = script_json(call.opts)
            try:
                return self.w._run_hot_script("moveToFinished", call.keys, call.args)
            except errors.ConnectionError:
                self._failed_try(call)
                failed[0] = True
                raise
        return write_through_blip(attempt, self.w.lock_duration_ms / 1000.0, until)

    def _finish(self, outcomes: Sequence[Outcome], fetch: int,
                sent: Optional[Tuple["FinishCall", Any]] = None,
                parent: "Optional[Worker]" = None) -> List[Job]:
        call, reply = sent if sent is not None else (
            self.finish_call(outcomes, fetch, parent), None)
        if reply is None:       # not sent, or its pipeline failed (it may have run: told apart)
            reply = self._write(call, min(o.give_up_at for o in outcomes), sent is not None)
        elif isinstance(reply, BaseException):
            raise reply
        codes, jobs, parent_jobs, ttl, next_delayed = cast(
            "Tuple[List[Any], List[Any], List[Any], int, int]", reply)
        if call.mark is not None and len(jobs) < call.fetch and not ttl:
            engine = self.w._engine
            if engine is not None:    # before the slots come back (Worker._after_finish)
                engine.found_empty(self.w, call.mark, next_delayed)
        stamp = call.stamp
        for o, code in zip(outcomes, codes):
            if self._written_before(o.job, code, stamp) or self._check(o.job, code, o.target):
                if isinstance(code, str):   # its event's id: waiters here settle now
                    LOCAL.finished(self.w.connection, self.keys.events, code, o.event)
                if o.target == "completed":
                    o.job.returnvalue = o.result
                    log_completed(WORKER_LOG, self.log_extra(o.job))
                self.w._emit(o.target, o.job, o.result)
        taken = [self.w._job_from_reply(*job) for job in jobs]
        if parent is not None:
            taken += [parent._job_from_reply(*job) for job in parent_jobs]
        return taken

    def _written_before(self, job: Job, code: Any, stamp: int) -> bool:
        """A refusal of a write retried after a connection error may be the refusal of
        our own first try: it was done, its reply lost (e.g. Redis shut down before
        sending it). That write set ``finishedOn`` to the same call's timestamp."""
        if code not in (-2, -3):
            return False
        try:
            finished = self.w.client.hget(job.key, "finishedOn")
        except errors.OrijsError:
            return False
        return finished is not None and str(finished) == str(stamp)

    def _check(self, job: Job, code: Any, what: str) -> bool:
        if isinstance(code, int) and code < 0:
            reason = LOCK_ERRORS.get(code, f"error {code}")
            log.warning("job %s of %s not moved to %s: %s; leaving it to its current owner",
                        job.id, self.keys.queue_key, what, reason)
            self.w._emit("error", errors.LockLost(f"job {job.id}: {reason}"))
            return False
        return True


@dataclass
class FinishCall:
    """A prepared moveToFinished call (its timestamp tells a lost reply's write apart)."""

    keys: List[str]
    args: List[Any]
    stamp: int
    fetch: int
    mark: Optional[Tuple[int, int]] = None   # Engine.mark() before it was sent, when it fetches
    opts: Dict[str, Any] = field(default_factory=dict)    # the takes' (args[3], as sent)
    parent: "Optional[Worker]" = None


# Error replies that speak of the server's state, not of the job being written: the
# outcome is kept and written once the server takes writes again.
_SERVER_STATE_REPLIES = ("OOM", "READONLY", "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN",
                         "CLUSTERDOWN", "NOSCRIPT", "MISCONF")


def _server_state(exc: BaseException) -> bool:
    cause = exc.__cause__
    if isinstance(cause, redis.exceptions.NoScriptError):   # its text lacks "NOSCRIPT"
        return True
    text = str(cause if cause is not None else exc)
    return text.split(" ", 1)[0].upper() in _SERVER_STATE_REPLIES
