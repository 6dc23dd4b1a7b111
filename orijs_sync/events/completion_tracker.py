"""CompletionTracker: routes job completions back to the emitter, by correlation id.

Flow (as in @orijs/bullmq): ``emit`` registers a pending completion *before*
the job is added, adds the job, then maps the job id to the correlation id. One
``QueueEvents`` (one thread, one ``XREAD`` over every queue watched here)
delivers ``completed`` / ``failed`` / ``removed`` events; the tracker looks up
the correlation ids waiting on that job and settles them. A job that finishes
before its id is mapped leaves its outcome in the early-result buffer, which
``map_job_id`` consumes. Outcomes are buffered only while some registration of
that queue is still unmapped, so jobs of other processes leave nothing behind.

Timeouts use one timer thread (a heap), not a timer per emit. Every map is
guarded by ``_lock``; callbacks run outside it, exactly once per registration.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import CancelledError
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Type

from .. import errors
from ..base import fork
from ..base import validate as check
from ..base.timer import Timer, TimerHandle
from ..base.util import to_seconds
from ..queue_events import QueueEvent, QueueEvents
from ..waits.futures import no_result

log = logging.getLogger(__name__)

__all__ = ["CompletionTracker", "PendingCompletion", "EarlyResult"]

OnSuccess = Callable[[Any], Any]
OnError = Callable[[BaseException], Any]
OnCancel = Callable[[], Any]

DEFAULT_TIMEOUT = 30.0


class PendingCompletion:
    __slots__ = ("on_success", "on_error", "on_cancel", "timer", "job_id", "label", "expected_id")

    def __init__(self, on_success: OnSuccess, on_error: Optional[OnError],
                 on_cancel: Optional[OnCancel], label: str,
                 expected_id: Optional[str] = None) -> None:
        self.label = label
        self.expected_id = expected_id      # the job id the add is to use (named on timeout)
        self.on_success = on_success
        self.on_error = on_error
        self.on_cancel = on_cancel
        self.timer: Optional[TimerHandle] = None
        self.job_id: Optional[str] = None


class EarlyResult:
    __slots__ = ("result", "is_failure")

    def __init__(self, result: Any, is_failure: bool) -> None:
        self.result = result
        self.is_failure = is_failure


class CompletionTracker:
    """Request-response over a queue's events stream."""

    def __init__(self, connection: Any = None, *, default_timeout: float = DEFAULT_TIMEOUT,
                 prefix: str = "bull", queue_events_class: Type[QueueEvents] = QueueEvents,
                 logger: Optional[logging.Logger] = None) -> None:
        self.connection = connection
        self.prefix = check.string(prefix, "prefix")
        check.function(queue_events_class, "queue_events_class")
        self.default_timeout: float = to_seconds(default_timeout, "default_timeout",
                                                allow_none=False) or 0.0
        self._queue_events_class = queue_events_class
        self._log = logger or log
        self._lock = threading.Lock()
        # queue -> correlation id -> pending
        self._pending: Dict[str, Dict[str, PendingCompletion]] = {}
        # queue -> job id -> correlation ids (several when emits share an idempotency key)
        self._job_ids: Dict[str, Dict[str, List[str]]] = {}
        # queue -> job id -> outcome that arrived before the job id was mapped
        self._early: Dict[str, Dict[str, EarlyResult]] = {}
        # queue -> registrations whose job id is not mapped yet
        self._unmapped: Dict[str, int] = {}
        self._watched: Set[str] = set()
        self._cancelling: Set[Tuple[str, str]] = set()   # (queue, job id): see remove_job
        self._timer = Timer("orijs-completion-timeouts")
        self._queue_events: Optional[QueueEvents] = None
        self._started = False
        self._stopped = False
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The parent's registrations are the parent's: dropped, their callbacks never
        called here. The timer and the events thread reset themselves."""
        self._lock = threading.Lock()
        self._pending = {}
        self._job_ids = {}
        self._early = {}
        self._unmapped = {}
        self._cancelling = set()

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> "CompletionTracker":
        with self._lock:
            if self._stopped:
                raise errors.ShutdownError("CompletionTracker is stopped")
            if self._started:
                return self
            self._started = True
        qe = self._queue_events_class([], connection=self.connection, prefix=self.prefix)
        qe._follow(self._on_event, ("completed", "failed", "removed"))   # see _expect
        qe.on_written(self._on_event)   # outcomes written here: settled without a wake
        self._timer.start()
        with self._lock:
            self._queue_events = qe
        return self

    def stop(self, settle_timeout: float = 5.0) -> None:
        """Let outcomes already written to the events streams settle their futures (up to
        ``settle_timeout`` seconds: the events thread may lag), then fail every pending
        completion with ``ShutdownError``, clear the maps, and close the events thread
        and the timer thread (both joined). Idempotent."""
        with self._lock:
            if self._stopped:
                return
            qe = self._queue_events
            pending = any(self._pending.values())
        if qe is not None and pending and settle_timeout > 0:
            try:
                qe.catch_up(settle_timeout)
            except errors.OrijsError as exc:   # Redis gone: nothing more will settle
                self._log.warning("CompletionTracker: reading the last outcomes failed: %s", exc)
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            pendings = [p for by_corr in self._pending.values() for p in by_corr.values()]
            self._pending.clear()
            self._job_ids.clear()
            self._early.clear()
            self._unmapped.clear()
            qe, self._queue_events = self._queue_events, None
        self._timer.stop()
        shutdown = errors.ShutdownError("CompletionTracker shutting down")
        for p in pendings:
            self._call(p.on_error, shutdown)
        if qe is not None:
            qe.close()

    @property
    def queue_events(self) -> Optional[QueueEvents]:
        return self._queue_events

    def watch(self, queue_name: str) -> None:
        """Follow ``queue_name``'s events from now on (idempotent)."""
        with self._lock:
            self._check_running()
            qe = self._queue_events
            watched = queue_name in self._watched
        assert qe is not None
        if watched:                 # every emit comes here: no key building, no checks
            qe.resume_after_fork()  # restarts the thread after a fork
            return
        qe.add_queue(queue_name)
        with self._lock:
            self._watched.add(queue_name)

    def _check_running(self) -> None:
        if self._stopped:
            raise errors.ShutdownError("CompletionTracker is stopped")
        if not self._started:
            raise errors.InvalidStateError("CompletionTracker is not started: call start()")

    # -- registration ------------------------------------------------------
    def register(self, queue_name: str, correlation_id: str, on_success: OnSuccess,
                 on_error: Optional[OnError] = None, *, timeout: Optional[float] = None,
                 on_cancel: Optional[OnCancel] = None, label: Optional[str] = None,
                 job_id: Optional[str] = None, watch: bool = True) -> None:
        """Wait for a job of ``queue_name``; ``timeout`` seconds (0 = none, None = default).
        ``label`` names the wait in its timeout error (default: the queue), with
        ``job_id``, the id the job is to get, until ``map_job_id`` gives the real one.
        ``watch=False``: the caller calls ``watch`` itself before adding the job (a
        Redis call, left to the thread that adds it)."""
        seconds = self.default_timeout if timeout is None else to_seconds(timeout, "timeout")
        if watch:
            self.watch(queue_name)
        with self._lock:
            self._check_running()
            by_corr = self._pending.setdefault(queue_name, {})
            if correlation_id in by_corr:
                raise errors.InvalidArgument(f"correlation id {correlation_id!r} is already registered")
            pending = PendingCompletion(on_success, on_error, on_cancel,
                                        label or f"queue {queue_name!r}", job_id)
            by_corr[correlation_id] = pending
            self._unmapped[queue_name] = self._unmapped.get(queue_name, 0) + 1
            if seconds:
                pending.timer = self._timer.call_later(
                    seconds, lambda: self._time_out(queue_name, correlation_id, seconds))

    def is_pending(self, queue_name: str, correlation_id: str) -> bool:
        """The registration is still waiting (not settled, timed out nor cancelled)."""
        with self._lock:
            return correlation_id in self._pending.get(queue_name, {})

    def map_job_id(self, queue_name: str, job_id: str, correlation_id: str) -> bool:
        """Tie the job to the registration; settles at once if its outcome came early.
        False when the registration is gone (it timed out, was cancelled or stopped)."""
        with self._lock:
            pending = self._pending.get(queue_name, {}).get(correlation_id)
            if pending is None or pending.job_id is not None:
                return pending is not None
            pending.job_id = job_id
            self._job_ids.setdefault(queue_name, {}).setdefault(job_id, []).append(correlation_id)
            early = self._early.get(queue_name, {}).pop(job_id, None)
            self._mapped_one(queue_name)
            if self._queue_events is not None:     # dropped with it in _take
                self._queue_events._expect(pending, [(queue_name, job_id)])
        if early is not None:
            if early.is_failure:
                self.fail(queue_name, correlation_id, early.result)
            else:
                self.complete(queue_name, correlation_id, early.result)
        return True

    def _mapped_one(self, queue_name: str) -> None:
        """One registration of the queue is no longer unmapped (lock held)."""
        left = self._unmapped.get(queue_name, 0) - 1
        if left > 0:
            self._unmapped[queue_name] = left
        else:
            self._unmapped.pop(queue_name, None)
            self._early.pop(queue_name, None)

    # -- settling ----------------------------------------------------------
    def _take(self, queue_name: str, correlation_id: str) -> Optional[PendingCompletion]:
        """Remove one registration and everything that refers to it (lock held)."""
        by_corr = self._pending.get(queue_name)
        pending = by_corr.pop(correlation_id, None) if by_corr else None
        if pending is None:
            return None
        if not by_corr:
            del self._pending[queue_name]
        self._timer.cancel(pending.timer)
        if pending.job_id is None:
            self._mapped_one(queue_name)
        else:
            if self._queue_events is not None:
                self._queue_events._unexpect(pending)
            by_job = self._job_ids.get(queue_name, {})
            corrs = by_job.get(pending.job_id)
            if corrs is not None:
                if correlation_id in corrs:
                    corrs.remove(correlation_id)
                if not corrs:
                    del by_job[pending.job_id]
            if not by_job:
                self._job_ids.pop(queue_name, None)
        return pending

    def _take_job(self, queue_name: str, job_id: str) -> List[PendingCompletion]:
        corrs = list(self._job_ids.get(queue_name, {}).get(job_id, ()))
        return [p for p in (self._take(queue_name, c) for c in corrs) if p is not None]

    def complete(self, queue_name: str, correlation_id: str, result: Any) -> None:
        with self._lock:
            pending = self._take(queue_name, correlation_id)
        if pending is not None:
            self._call(pending.on_success, result)

    def fail(self, queue_name: str, correlation_id: str, error: BaseException) -> None:
        with self._lock:
            pending = self._take(queue_name, correlation_id)
        if pending is not None:
            self._call(pending.on_error, error)

    def cancel_job(self, queue_name: str, job_id: str) -> int:
        """The job was removed from its queue: cancel whoever waits on it."""
        with self._lock:
            pendings = self._take_job(queue_name, job_id)
        for pending in pendings:
            self._cancelled(pending)
        return len(pendings)

    def remove_job(self, queue_name: str, job_id: str, remove: Callable[[], bool]) -> bool:
        """``remove()`` the job (True: removed), then cancel whoever waits on it here, on
        the calling thread (so a ``cancel()`` runs the Future's callbacks before it
        returns): the "removed" event it writes settles nothing meanwhile."""
        key = (queue_name, job_id)
        with self._lock:
            self._cancelling.add(key)
        try:
            if not remove():
                return False
            with self._lock:
                pendings = self._take_job(queue_name, job_id)
        finally:
            with self._lock:
                self._cancelling.discard(key)
        for pending in pendings:
            self._cancelled(pending)
        return True

    def _cancelled(self, pending: PendingCompletion) -> None:
        if pending.on_cancel is not None:
            self._call(pending.on_cancel)
        else:
            self._call(pending.on_error, CancelledError())

    def _time_out(self, queue_name: str, correlation_id: str, seconds: float) -> None:
        with self._lock:
            pending = self._pending.get(queue_name, {}).get(correlation_id)
            if pending is None:
                return
            added = pending.job_id is not None
            error = no_result(pending.label, pending.job_id or pending.expected_id, seconds,
                              "" if added else ": Redis did not confirm the add in that time")
        self.fail(queue_name, correlation_id, error)

    def _on_event(self, ev: QueueEvent) -> None:
        """On the events thread: settle whoever waits on the job."""
        if ev.event not in ("completed", "failed", "removed") or ev.job_id is None:
            return
        if not (self._job_ids.get(ev.queue, {}).get(ev.job_id) or self._unmapped.get(ev.queue)):
            return      # (hints, read again locked below) nobody here waits on this job:
                        # most events, in a process that emits to many queues
        outcome: Any = None
        if ev.event == "completed":
            outcome = ev.value
        elif ev.event == "failed":
            outcome = errors.JobFailed(ev.fields.get("failedReason", ""), ev.job_id)
        with self._lock:
            if ev.event == "removed" and (ev.queue, ev.job_id) in self._cancelling:
                return          # remove_job settles them, on its caller's thread
            pendings = self._take_job(ev.queue, ev.job_id)
            # Buffer while any registration of the queue is unmapped: it may be for this job
            # (a duplicate idempotency key registered while the job finished).
            if ev.event != "removed" and self._unmapped.get(ev.queue, 0) > 0:
                self._early.setdefault(ev.queue, {})[ev.job_id] = EarlyResult(
                    outcome, ev.event == "failed")
        for pending in pendings:
            if ev.event == "completed":
                self._call(pending.on_success, outcome)
            elif ev.event == "failed":
                self._call(pending.on_error, outcome)
            else:
                self._cancelled(pending)

    def _call(self, fn: Optional[Callable[..., Any]], *args: Any) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - a callback must not break the tracker
            self._log.exception("completion callback %r failed", fn)

    # -- introspection -----------------------------------------------------
    def sizes(self) -> Dict[str, int]:
        """Entries held (for memory checks): all zero when nothing is pending."""
        with self._lock:
            sizes = {
                "pending": sum(len(m) for m in self._pending.values()),
                "job_ids": sum(len(m) for m in self._job_ids.values()),
                "early_results": sum(len(m) for m in self._early.values()),
                "unmapped": sum(self._unmapped.values()),
            }
        sizes["timers"] = self._timer.heap_size
        return sizes

    def pending_for(self, queue_name: str, job_id: str) -> Tuple[str, ...]:
        with self._lock:
            return tuple(self._job_ids.get(queue_name, {}).get(job_id, ()))
