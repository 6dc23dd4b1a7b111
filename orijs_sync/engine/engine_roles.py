"""The threads of a worker engine (see ``engine.engine``): the fetcher, the finisher and
the per-queue periodic roles (lock renewal, stalled checks). Each is a ``Role``: one
``loop()`` step, stopped by the engine's stop event.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from .. import errors
from ..base.roles import Role
from .processing import HELD, Outcome

if TYPE_CHECKING:  # pragma: no cover
    from ..job import Job
    from ..worker import Worker
    from .engine import Engine

log = logging.getLogger(__name__)

IDLE_WAIT = 1.0                 # longest sleep of a periodic role with nothing due
Call = Tuple[str, List[str], List[Any]]     # a script's name, keys and arguments


class Fetcher(Role):
    """Moves jobs to active for the queues that may have some; when none may, blocks
    in one ``BZPOPMIN`` over the markers of the queues waiting for jobs and the
    engine's wake key (a change of the engine's state pushes to that key, so a wake
    sent before the block reaches Redis is never lost)."""

    name = "fetcher"

    def __init__(self, engine: "Engine") -> None:
        super().__init__(engine._stop)
        self.e = engine
        self.blocking = engine.connection.blocking_client(engine.longest_block,
                                                          engine.client_name)
        try:   # connect now: a named connection lists the worker (getWorkers) at once
            self.blocking.call("PING")
        except errors.OrijsError:
            log.debug("engine %s: blocking connection not opened yet", engine.label)

    def loop(self) -> None:
        due = self.e.take_due()
        if not due:
            self._block()
            return
        takes: List[Tuple["Worker", int]] = []
        for w in due:
            taken = w._take_slots()
            if taken:
                takes.append((w, taken))
        if len(takes) == 1:
            w, taken = takes[0]
            try:
                reply = w._move_to_active(taken)
            except BaseException:
                self._failed(w, taken)
                raise
            self._took(w, taken, *reply)
        elif takes:
            self._fetch_many(takes)

    def _fetch_many(self, takes: List[Tuple["Worker", int]]) -> None:
        """One pipelined round trip takes jobs for many queues (e.g. those whose
        markers fired together)."""
        calls = [w._fetch_call(taken) for w, taken in takes]
        try:
            replies = self.e.scripts.run_many([("moveToActive", keys, args)
                                               for keys, args, _ in calls])
        except BaseException:
            for (w, taken), (_, _, opts) in zip(takes, calls):
                w._runner.lost.failed(opts, taken)    # it may have run: see LostTakes
                self._failed(w, taken)
            raise
        for (w, taken), (_, _, opts), reply in zip(takes, calls, replies):
            try:
                if isinstance(reply, Exception):
                    raise reply
                self._took(w, taken, *w._fetch_reply(reply))
            except Exception as exc:  # noqa: BLE001 - this queue's error; the others go on
                w._runner.lost.failed(opts, taken)
                self._failed(w, taken)
                log.warning("worker %s: taking jobs failed: %s", w.name, exc)
                w._emit("error", exc)

    def _failed(self, w: "Worker", taken: int) -> None:
        """Never lose a slot: the queue is looked at again after a short pause."""
        w._give_back_slots(taken, tell=False)
        self.e.set_due(w, time.monotonic() + 0.1)

    def _took(self, w: "Worker", taken: int, jobs: List["Job"], ttl: int,
              next_delayed: int) -> None:
        w._give_back_slots(taken - len(jobs), tell=False)   # fetched() looks at it next
        for job in jobs:
            w._dispatch(job)
        self.e.fetched(w, len(jobs) == taken, ttl, next_delayed)   # taken >= 1
        if jobs:
            w._drained = False
        elif not w._drained and not ttl:
            w._drained = True
            w._emit("drained")

    def _block(self) -> None:
        markers, timeout = self.e.start_block()
        if not markers:
            self.e.end_block(None)
            self.e.idle_wait(timeout)
            return
        if timeout <= 0.001:
            self.e.end_block(None)
            return
        popped = pop_marker(self.blocking, markers, self.e.wake_key_of(None), timeout,
                            lambda: self.e.end_block(None))
        if popped is not None:
            self.e.marker_fired(popped)

    def interrupt(self) -> None:
        self.blocking.interrupt()


def pop_marker(blocking: Any, markers: List[str], wake_key: str, timeout: float,
               unblocked: Callable[[], None]) -> Optional[str]:
    """One ``BZPOPMIN`` over the markers and the wake key: the marker popped (None for
    the wake key, a timeout or an interrupt). ``unblocked()`` runs once it returns."""
    try:
        popped = blocking.bzpopmin(markers + [wake_key], max(timeout, 0.01))
    except Exception:
        if blocking.take_interrupt():
            return None             # interrupted (stopping): the loop looks again
        raise
    finally:
        unblocked()
    if popped and popped[0] != wake_key:
        return str(popped[0])
    return None


class MarkerWatcher(Role):
    """Blocks on the markers of one shard past the fetcher's; a marker popped makes
    its queues due and wakes the fetcher."""

    name = "marker-watcher"

    def __init__(self, engine: "Engine", shard: int) -> None:
        super().__init__(engine._stop)
        self.e = engine
        self.shard = shard
        self.name = f"marker-watcher-{shard}"
        self.blocking = engine.connection.blocking_client(engine.longest_block,
                                                          engine.client_name)

    def loop(self) -> None:
        markers = self.e.start_watch(self.shard)
        if not markers:
            self.e.end_block(self.shard)
            self.e.idle_watch(self.shard)
            return
        popped = pop_marker(self.blocking, markers, self.e.wake_key_of(self.shard),
                            self.e.longest_block, lambda: self.e.end_block(self.shard))
        if popped is not None:
            self.e.marker_fired(popped)

    def interrupt(self) -> None:
        self.blocking.interrupt()


class Finisher(Role):
    """Writes finished jobs' outcomes many per script call (one call per queue), and
    hands the next jobs that call took to the pool. Outcomes wait here, never in a
    handler thread.

    Two threads write: a batch takes at most half of a queue's concurrency (rounded
    up), so while one batch is in Redis the jobs of the other run in the process. With
    one writer, Redis waited while the process read the reply and ran the jobs, and
    the process waited while Redis wrote the batch (each side about half busy)."""

    name = "finisher"
    threads = 2
    max_batch = 100

    def __init__(self, engine: "Engine") -> None:
        super().__init__(engine._stop)
        self.e = engine
        self._cv = threading.Condition()     # guards _pending and _busy
        self._pending: List[Outcome] = []
        self._busy: Dict[int, int] = {}      # writes under way (here or inline), by worker

    def submit(self, outcome: Outcome, alone: bool) -> bool:
        """Queue an outcome; returns False (queuing nothing) when the job is ``alone``
        (its worker's only one) and nothing of its worker is being written or waits
        here: the caller then writes it itself, saving a thread hop when jobs come
        one at a time."""
        key = id(outcome.job._worker)
        with self._cv:
            if alone and not self._busy.get(key) and not any(
                    id(o.job._worker) == key for o in self._pending):
                return False
            self._pending.append(outcome)
            self._cv.notify()
            return True

    def forget(self, worker: "Worker") -> None:
        """Drop the outcomes of a worker that closed without waiting for them: their
        jobs stall and are taken over, as with a worker that stopped."""
        with self._cv:
            self._pending = [o for o in self._pending if o.job._worker is not worker]

    def loop(self) -> None:
        with self._cv:
            if not self._pending:
                self._cv.wait(0.5)
            late = self._take_late(time.monotonic())
            groups = self._take_batch()
            if self._pending:
                self._cv.notify()          # the other thread takes the rest
        give_up(late, None)
        HELD.jobs = tuple(o.job for group in groups.values() for o in group)  # see held_here
        try:
            failure = self._write_groups(groups)
        finally:
            HELD.jobs = ()
        if failure is not None:
            raise failure

    def _write_groups(self, groups: Dict[int, List[Outcome]]) -> Optional[BaseException]:
        """Write each worker's batch (many in one pipelined round trip); the first error."""
        sent = self._send_many(list(groups.values())) if len(groups) > 1 else {}
        failure: Optional[BaseException] = None
        for key, group in groups.items():
            try:
                self.write(group, sent=sent.get(key))
            except Exception as exc:  # noqa: BLE001 - kept; the other queues are written
                failure = failure or exc
        return failure

    def _take_late(self, now: float) -> List[Outcome]:
        """Under ``_cv``: the outcomes retried for their lock duration, taken out."""
        late = [o for o in self._pending if o.give_up_at <= now]
        if late:
            self._pending = [o for o in self._pending if o.give_up_at > now]
        return late

    def _take_batch(self) -> Dict[int, List[Outcome]]:
        """Under ``_cv``: the outcomes to write now, by worker: at most ``max_batch``,
        and of each worker at most half its concurrency (rounded up)."""
        groups: Dict[int, List[Outcome]] = {}
        left: List[Outcome] = []
        taken = 0
        for outcome in self._pending:
            w = outcome.job._worker
            group = groups.setdefault(id(w), [])
            if taken < self.max_batch and len(group) < (w.concurrency + 1) // 2:
                group.append(outcome)
                taken += 1
            else:
                left.append(outcome)
        self._pending = left
        return {key: group for key, group in groups.items() if group}

    def _send_many(self, groups: List[List[Outcome]]) -> Dict[int, Tuple[Any, Any]]:
        """One pipelined round trip with the moveToFinished call of each queue: each
        queue's call and its reply (or error; None when the pipeline failed as a whole),
        by worker. write() sends a call without a reply again on its own."""
        calls = []
        for group in groups:
            w: Any = group[0].job._worker
            w._set_finishing(group, True)    # before the pipeline: their locks go with it
            fetch = len(group) if w._fetch_next_allowed() else 0
            calls.append((w, w._runner.finish_call(group, fetch)))
        try:
            replies: List[Any] = self.e.scripts.run_many(
                [("moveToFinished", call.keys, call.args) for _, call in calls])
        except Exception:  # noqa: BLE001 - ran or not, unknown: write() sends each again
            log.debug("finisher: pipelined write failed; each queue's call is sent again",
                      exc_info=True)
            replies = [None] * len(calls)
        return {id(w): (call, reply) for (w, call), reply in zip(calls, replies)}

    def write(self, batch: List[Outcome], keep_one: bool = False,
              sent: Optional[Tuple[Any, Any]] = None) -> Optional["Job"]:
        """Write one worker's batch and hand its slots on (finisher thread, or a pool
        thread inline). With ``keep_one``, the first next job is returned for the
        caller to run itself. ``sent``: its call went in a pipeline, with this reply."""
        w: Any = batch[0].job._worker
        with self._cv:
            self._busy[id(w)] = self._busy.get(id(w), 0) + 1
        w._set_finishing(batch, True)   # the renewer keeps their locks while this retries
        parent = self.e.parent_taker(batch[0].job) if keep_one and len(batch) == 1 else None
        next_jobs: List["Job"] = []
        held = getattr(HELD, "jobs", ())
        HELD.jobs = held + tuple(o.job for o in batch)     # its listeners run here
        try:
            if sent is None:
                fetch = len(batch) if w._fetch_next_allowed() else 0
                next_jobs = w._runner.finish(batch, fetch, parent=parent)
            else:
                next_jobs = w._runner.finish(batch, sent[0].fetch, sent)
        except Exception as exc:
            w._set_finishing(batch, False)
            with self._cv:       # keep them: written on the next try (the role backs off)
                self._pending[:0] = batch
                late = self._take_late(time.monotonic())
                self._cv.notify()
            give_up(late, exc)
            raise
        finally:
            HELD.jobs = held
            with self._cv:
                self._busy[id(w)] -= 1
                if not self._busy[id(w)]:
                    del self._busy[id(w)]
            if parent is not None and not any(job._worker is parent for job in next_jobs):
                parent._give_back_slots(1)      # its parent was not taken (or not made ready)
        return w._after_finish(batch, next_jobs, keep_one)  # type: ignore[no-any-return]

    def interrupt(self) -> None:
        with self._cv:
            self._cv.notify_all()


def give_up(outcomes: List[Outcome], exc: Optional[BaseException]) -> None:
    """Outcomes not written within one lock duration after their handler returned (Redis
    unreachable or refusing): their jobs are let go, their locks expire and the stalled
    checker takes them over (docs/guarantees.md); close() no longer waits for them."""
    for outcome in outcomes:
        w: Any = outcome.job._worker
        log.warning("worker %s: the outcome of job %s (%s) could not be written within one "
                    "lock duration (%s); the stalled checker takes the job over", w.name,
                    outcome.job.id, outcome.target, exc or "not retried since")
        lost = errors.LockLost(f"job {outcome.job.id}: its outcome ({outcome.target}) could "
                               f"not be written within one lock duration; the stalled "
                               f"checker takes it over")
        lost.__cause__ = exc
        w._emit("error", lost)
        w._let_go([outcome.job])
        w._give_back_slots(1)


class PerQueue(Role):
    """Runs a periodic script for each worker of the engine when it is due (lock
    renewal, stalled checks), those due together in one pipelined round trip: each
    queue keeps its own pacing."""

    def __init__(self, engine: "Engine", name: str, stalled: bool) -> None:
        super().__init__(engine._stop)
        self.e = engine
        self.name = name
        self.stalled = stalled
        # this thread's own: when each worker is due, a heap of (time, seq, worker id),
        # so a pass costs what is due, not the number of queues (a thousand queues,
        # each due on its own, woke it a hundred times a second to scan them all)
        self._heap: List[Tuple[float, int, int]] = []
        self._seq = itertools.count()
        self._known: Dict[int, Tuple["Worker", int]] = {}   # worker id -> (it, its seq)
        self._members = -1                                # the membership seen last

    def loop(self) -> None:
        self._follow_membership()
        now = time.monotonic()
        due: List["Worker"] = []
        while self._heap and self._heap[0][0] <= now:
            _, seq, key = heapq.heappop(self._heap)
            known = self._known.get(key)
            if known is not None and known[1] == seq:     # else: gone, or due again later
                due.append(known[0])
        for w, delay in self._batch(due):
            self._due_in(w, delay)
        nxt = self._heap[0][0] if self._heap else now + IDLE_WAIT
        self.e.wait_membership_change(min(max(nxt - time.monotonic(), 0.0), IDLE_WAIT))

    def _follow_membership(self) -> None:
        """Workers that joined are due now; those that left are forgotten (their heap
        entries are skipped)."""
        members, workers = self.e.membership(self._members)
        if members == self._members:
            return
        self._members = members
        live = {id(w): w for w in workers}
        for key in [k for k, (w, _) in self._known.items() if live.get(k) is not w]:
            del self._known[key]
        for key, w in live.items():
            if key not in self._known:
                self._due_in(w, 0.0)

    def _due_in(self, w: "Worker", delay: float) -> None:
        if id(w) in self._known and self._known[id(w)][0] is not w:
            return
        seq = next(self._seq)
        self._known[id(w)] = (w, seq)
        heapq.heappush(self._heap, (time.monotonic() + delay, seq, id(w)))

    def _batch(self, due: List["Worker"]) -> List[Tuple["Worker", float]]:
        """Send the calls of the due workers; each one's delay until it is due again."""
        delays: List[Tuple["Worker", float]] = []
        calls: List[Tuple["Worker", Call]] = []
        for w in due:
            call = self._call(w)
            if call is None:
                delays.append((w, self._done(w, [])))
            else:
                calls.append((w, call))
        for (w, _), reply in zip(calls, self._send(calls)):
            delays.append((w, self._done(w, reply)))
        return delays

    def _send(self, calls: List[Tuple["Worker", Call]]) -> List[Any]:
        """The replies (or errors) of the calls: one pipelined round trip for many."""
        if not calls:
            return []
        try:
            return self.e.scripts.run_many([call for _, call in calls])
        except Exception as exc:  # noqa: BLE001 - Redis unreachable: every call failed
            return [exc] * len(calls)

    def _call(self, w: "Worker") -> Optional[Call]:
        if not self.stalled:
            return w._renewer.call()
        return None if w.skip_stalled_check else w._stalled_call()

    def _done(self, w: "Worker", reply: Any) -> float:
        """Handle one worker's reply; the seconds until it is due again."""
        if not self.stalled:
            return w._renewer.done(reply)
        if w.skip_stalled_check:
            return 3600.0
        if isinstance(reply, BaseException):
            log.warning("worker %s: stalled check failed: %s", w.name, reply)
            w._emit("error", reply)
            return min(w.stalled_interval, w.max_reconnect_delay)
        w._stalled_done(reply)
        return w.stalled_interval
