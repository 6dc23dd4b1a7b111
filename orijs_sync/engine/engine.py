"""The worker engine: one set of threads serving one or many Workers (queues).

A Worker keeps its queue's own state (slots, pause, limiter, active jobs, lock
duration, stalled pacing, listeners); its engine owns the threads that work for
every queue it serves (``engine.engine_roles``):

- one fetcher: moves jobs to active for the queues that may have some, else blocks
  in one ``BZPOPMIN`` over the markers of the others and the engine's wake key. The
  markers are dealt out ``SHARD_SIZE`` per blocking connection: while they fit in
  one shard the fetcher waits on them itself; past that a marker watcher thread
  waits on each shard's, and the fetcher waits in the process for what they pop (a
  ``BZPOPMIN`` costs, in Redis and in redis-py, in proportion to the keys it names,
  and is sent again after every wake);
- one finisher: writes outcomes many per script call per queue, the calls of many
  queues in one pipelined round trip;
- one lock renewer and one stalled checker, each paced per queue;
- one handler pool of at most ``max_threads`` threads (made as jobs run at once):
  a queue is only fetched for while a thread is free for its job.

A Worker started alone has an engine of its own (its threads, named after it). A
``orijs_sync.WorkerGroup`` shares one engine between all its Workers (one per
hash slot on a cluster, whose multi-key ``BZPOPMIN`` stays within one slot).

Wakes: every change that may let the fetcher take jobs (a queue joins or resumes, a
slot or thread is freed, a watcher's marker fired) or changes the markers a blocker
waits on notifies the engine. A blocker (fetcher or watcher) blocked in Redis is
woken by a push to its wake key, never by cutting its socket: a push that lands
before the ``BZPOPMIN`` does makes it return at once, so no wake is lost in between.
"""
from __future__ import annotations

import heapq
import logging
import random
import threading
import time
import uuid
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

from ..base import fork
from ..base.pools import join_threads
from ..base.roles import Role
from ..base.shards import deal
from ..base.util import now_ms
from ..store.connection import RedisConnection
from ..store.scripts import Scripts
from .engine_roles import IDLE_WAIT, Fetcher, Finisher, MarkerWatcher, PerQueue
from .handler_pool import HandlerPool
from .local import LOCAL, reserve_one

if TYPE_CHECKING:  # pragma: no cover
    from ..job import Job
    from ..worker import Worker

log = logging.getLogger(__name__)

WAKE_TTL_MS = 60_000     # a wake nobody popped (its process died) expires
SHARD_SIZE = 128         # markers per blocking connection (the fetcher's, then watchers')
MAX_SHARDS = 8           # past SHARD_SIZE * MAX_SHARDS queues, dealt round-robin
# queues fetched for in one round trip at most, those due first first; the next ones go in
# the next round. A thousand idle queues looking again at once, in one pipelined call,
# held Redis and this process for 15-20 ms: an emit waited on through it took as long.
FETCH_BATCH = 32
DRAIN_SPREAD = 0.1       # a queue found empty looks again after 90-100 % of its drain delay


class Engine:
    """Shared roles for the workers of one connection (and hash slot); see the module
    docstring. Runs from construction until ``remove()`` takes its last worker."""

    def __init__(self, connection: RedisConnection, *, label: str, max_threads: int,
                 anchor_key: str, longest_block: float,
                 client_name: Optional[str] = None) -> None:
        self.connection = connection
        self.label = label
        self.max_threads = max_threads
        self.longest_block = longest_block
        self.client_name = client_name
        self.scripts = Scripts(connection.client)    # the calls it pipelines for many queues
        # in the slot of the markers (it extends one of them), so one BZPOPMIN takes all
        self.wake_key = f"{anchor_key}:orijs-wake:{uuid.uuid4().hex}"
        self._stop = threading.Event()
        self._cv, self._membership = _conditions()   # one lock: guards every field below
        self._workers: Dict[int, "Worker"] = {}   # by id()
        self._ready: Dict[int, float] = {}    # worker id -> monotonic time to try fetching
        self._drain: Dict[int, float] = {}    # worker id -> time its block times out
        self._next_drain = float("inf")       # earliest of _drain (or sooner)
        self._fired: Set[int] = set()         # marker popped since its last take_due
        # shard -> {worker id: marker key}: the markers its blocker waits on
        self._waiting: Dict[int, Dict[int, str]] = {0: {}}
        self._owners: Dict[str, List["Worker"]] = {}   # marker key -> its workers
        self._shard_of: Dict[str, int] = {}   # marker key -> its shard (0: the fetcher's)
        self._fetch_blocked = False           # the fetcher is in its BZPOPMIN now
        self._blocked: Set[int] = set()       # shards whose watcher is in Redis now
        self._stale: Set[int] = set()         # shards whose markers changed since
        self._watchers: Dict[int, MarkerWatcher] = {}
        self._starved = False                 # a queue could fetch but for the thread cap
        self._changed = 0                     # bumped on every change (wakes waiters)
        self._looks = 0                       # bumped when a queue turns ready or waiting
        self._members = 0                     # bumped when a worker comes or goes
        self._seen = 0                        # _changed as the fetcher last saw it
        self._threads_free = max_threads      # guarded by _slots_lock (a leaf lock)
        self._slots_lock = threading.Lock()
        self._state = "running"               # running -> stopped
        self.executor = HandlerPool(max_threads, f"orijs-worker-{label}")
        self.finisher = Finisher(self)
        self._fetcher = Fetcher(self)
        self._roles: List[Role] = [self._fetcher, self.finisher,
                                   PerQueue(self, "lock-renewer", stalled=False),
                                   PerQueue(self, "stalled-checker", stalled=True)]
        for role in self._roles:
            role.on_error = self._role_error  # type: ignore[method-assign]
            role.probe = connection.ping
        fork.track(self)
        for role in self._roles:
            role.start(f"orijs-{role.name}-{label}")

    def _after_fork_in_child(self) -> None:
        """A forked child never runs its parent's engine: it is left stopped, empty."""
        self._cv, self._membership = _conditions()
        self._slots_lock = threading.Lock()
        self._workers = {}
        self._roles = []
        self._state = "stopped"

    def _role_error(self, exc: BaseException) -> None:
        for w in self.workers():
            w._emit("error", exc)

    def workers(self) -> List["Worker"]:
        with self._cv:
            return list(self._workers.values())

    # -- membership ----------------------------------------------------------
    def add(self, worker: "Worker") -> bool:
        """Serve ``worker`` from now on; False when this engine has stopped."""
        with self._cv:
            if self._state != "running":
                return False
            self._workers[id(worker)] = worker
            marker = worker.keys.marker
            self._owners.setdefault(marker, []).append(worker)
            if marker not in self._shard_of:
                self._shard_of[marker] = deal(len(self._shard_of), SHARD_SIZE, MAX_SHARDS)
            watchers = self._watchers_for(self._shard_of[marker])
            self._set_ready(worker, 0.0)
            self._listen(worker)
            for role in self._roles:
                role.max_delay = min(w.max_reconnect_delay for w in self._workers.values())
            self._members += 1
            self._membership.notify_all()
            self._touch()
            wakes = self._wakes_due(worker)
        for watcher in watchers:
            watcher.start(f"orijs-{watcher.name}-{self.label}")
        self._send_wakes(wakes)
        LOCAL.add_worker(worker)          # a Queue of this process may hand it jobs
        return True

    def _watchers_for(self, shard: int) -> List[MarkerWatcher]:
        """Under ``_cv``: the new watchers (to start) once markers fill more than one
        shard: one per shard, the first shard's included (the fetcher then leaves
        its block on them, woken by ``_wakes_due``)."""
        self._waiting.setdefault(shard, {})
        if shard == 0 or shard in self._watchers:
            return []
        fresh = []
        for each in ([0, shard] if not self._watchers else [shard]):
            watcher = self._watchers[each] = MarkerWatcher(self, each)
            watcher.on_error = self._role_error  # type: ignore[method-assign]
            watcher.probe = self.connection.ping
            watcher.max_delay = self._fetcher.max_delay
            self._roles.append(watcher)
            fresh.append(watcher)
        return fresh

    def parent_taker(self, job: "Job") -> "Optional[Worker]":
        """A worker of this engine serving the queue of ``job``'s parent (another queue
        than the job's), with a slot reserved for one job: the call writing ``job`` takes
        the parent at once if it makes it ready (see JobRunner.finish), so no marker wakes
        the fetcher for it. None when there is no such worker or no free slot."""
        parent = job.parent
        if not isinstance(parent, dict) or not isinstance(parent.get("queueKey"), str):
            return None
        marker = parent["queueKey"] + ":marker"
        if marker == job._worker.keys.marker:
            return None            # the same queue: its own next-job take covers it
        with self._cv:
            owners = list(self._owners.get(marker, ()))
        return reserve_one(owners)

    def wake_key_of(self, shard: Optional[int]) -> str:
        """The wake key of shard's watcher (None: the fetcher's)."""
        return self.wake_key if shard is None else f"{self.wake_key}:{shard}"

    def remove(self, worker: "Worker", drained: bool, deadline: Optional[float]) -> bool:
        """Stop serving ``worker`` (its outcomes not written yet are dropped unless
        ``drained``); the last one out stops the engine and joins its threads until
        ``deadline``. Returns True when this stopped the engine."""
        LOCAL.remove_worker(worker)
        with self._cv:
            if self._workers.pop(id(worker), None) is None:
                return False
            self._forget_worker(worker)
            last = not self._workers and self._state == "running"
            if last:
                self._state = "stopped"
            self._members += 1
            self._membership.notify_all()
            self._touch()
        if not drained:
            self.finisher.forget(worker)
        if last:
            self._shut_down(drained, deadline)
        return last

    @property
    def stopped(self) -> bool:
        return self._state != "running"

    def _shut_down(self, drained: bool, deadline: Optional[float]) -> None:
        self._stop.set()
        with self._cv:                 # roles waiting in the process stop at once
            self._cv.notify_all()
            self._membership.notify_all()
        for role in self._roles:          # the calling thread (a listener's) is not joined
            if not role.stop(deadline):
                log.warning("engine %s: %s did not stop in time", self.label, role.name)
        threads = self.executor.threads
        self.executor.shutdown()
        if drained:
            join_threads(threads, deadline)
        for role in self._roles:
            blocking = getattr(role, "blocking", None)
            if blocking is not None:
                blocking.close()

    # -- handler threads (the engine's slots) --------------------------------
    def take_threads(self, wanted: int) -> int:
        """Reserve up to ``wanted`` handler threads for jobs about to be taken."""
        with self._slots_lock:
            taken = min(wanted, self._threads_free)
            self._threads_free -= taken
            return taken

    def give_threads(self, count: int) -> bool:
        """Handler threads freed; True when none was free before (the fetcher may have
        left queues waiting for one)."""
        with self._slots_lock:
            starved = self._threads_free <= 0
            self._threads_free += count
            return starved

    # -- fetch scheduling ----------------------------------------------------
    # Every worker is either ready (``_ready``: fetch at that time, when it may) or
    # waiting for its marker (``_drain``: until its drain delay ends). ``_waiting`` holds
    # the markers the blockers wait on: those of every worker that listens (not paused,
    # not closing, with a free slot), ready or not (a marker popped for a ready worker
    # changes nothing), so the markers waited on do not change with every job.
    def _set_ready(self, w: "Worker", at: float) -> None:
        """Under ``_cv``."""
        key = id(w)
        self._drain.pop(key, None)
        self._ready[key] = at
        self._looks += 1

    def _set_waiting(self, w: "Worker", until: float) -> None:
        """Under ``_cv``."""
        key = id(w)
        self._ready.pop(key, None)
        self._drain[key] = until
        self._next_drain = min(self._next_drain, until)
        self._looks += 1

    def _listen(self, w: "Worker") -> None:
        """Under ``_cv``: ``w``'s marker is waited on while it may take a job."""
        shard = self._shard_of[w.keys.marker]
        if not w._can_fetch():
            self._unlisten(w)
        elif id(w) not in self._waiting[shard]:
            self._waiting[shard][id(w)] = w.keys.marker
            self._stale.add(shard)

    def _unlisten(self, w: "Worker") -> None:
        """Under ``_cv``: ``w``'s marker is no longer waited on."""
        shard = self._shard_of.get(w.keys.marker, 0)
        if self._waiting[shard].pop(id(w), None) is not None:
            self._stale.add(shard)

    def _forget_worker(self, w: "Worker") -> None:
        """Under ``_cv``."""
        self._ready.pop(id(w), None)
        self._drain.pop(id(w), None)
        self._fired.discard(id(w))
        self._unlisten(w)
        owners = self._owners.get(w.keys.marker, [])
        if w in owners:
            owners.remove(w)
        if not owners:
            self._owners.pop(w.keys.marker, None)

    def _fetchable(self, w: "Worker") -> bool:
        return w._can_fetch() and self._threads_free > 0

    def take_due(self) -> List["Worker"]:
        """The fetcher: the queues to fetch for now."""
        now = time.monotonic()
        with self._cv:
            self._seen = self._changed        # a change after this: no block (see below)
            if now >= self._next_drain:       # blocks timed out: look at those queues again
                expired = [(k, until) for k, until in self._drain.items() if until <= now]
                for key, until in expired:    # (after those due sooner: a marker popped...)
                    self._set_ready(self._workers[key], until)
                self._next_drain = min(self._drain.values(), default=float("inf"))
            due = [(at, k) for k, at in self._ready.items()
                   if at <= now and self._workers[k]._can_fetch()]
            self._starved = bool(due) and self._threads_free <= 0
            if self._starved:
                return []
            if len(due) > FETCH_BATCH:
                due = heapq.nsmallest(FETCH_BATCH, due)
            ready = [self._workers[k] for _, k in due]
            self._fired.difference_update(id(w) for w in ready)
            return ready

    def set_due(self, w: "Worker", at: float) -> None:
        with self._cv:
            if id(w) in self._workers:
                self._set_ready(w, at)

    def fetched(self, w: "Worker", full: bool, ttl: int, next_delayed: int) -> None:
        """After a fetch: one that took all the jobs it asked for (``full``) looks again
        at once (there may be more); a rate limit after its ttl (at most the worker's
        ``maximum_rate_limit_delay``: a look promotes due delayed jobs); else (it found the
        queue empty, and its script cleared the base marker the takes left) the queue
        waits on its marker until its drain delay ends (see ``_wait_for_marker``) or
        its next delayed job is due. A marker popped while the fetch was under way (a job
        added just after it looked) makes it look again at once."""
        now = time.monotonic()
        with self._cv:
            if id(w) not in self._workers:
                return
            self._listen(w)          # its slots changed: waited on only while it has free ones
            fired = id(w) in self._fired
            self._fired.discard(id(w))
            if full or fired or ttl > 0:     # rate limited: looks again within its bound
                self._set_ready(w, now + min(ttl / 1000.0, w.maximum_rate_limit_delay))
                return
            self._wait_for_marker(w, now, next_delayed)

    def _wait_for_marker(self, w: "Worker", now: float, next_delayed: int) -> None:
        """Under ``_cv``: ``w`` found its queue empty; it waits on its marker, up to its
        drain delay less a random tenth of it: queues that found themselves empty
        together (a thousand started at once) look again spread out, not together."""
        until = now + w.drain_delay * (1.0 - DRAIN_SPREAD * random.random())
        if next_delayed:
            until = min(until, now + max(next_delayed - now_ms(), 0) / 1000.0)
        self._set_waiting(w, until)

    def mark(self) -> Tuple[int, int]:
        """Where things stand before a finish's call looks for the next jobs (see
        found_empty)."""
        with self._cv:
            return self._changed, self._looks

    def found_empty(self, w: "Worker", mark: Tuple[int, int], next_delayed: int) -> None:
        """The call that wrote ``w``'s outcomes also looked for its next jobs and found
        its queue empty (not rate limited): ``w`` (re)starts its wait on its marker, as
        after a fetch that found it empty. When still ready from an earlier full fetch,
        the slots the write frees then do not send the fetcher to look again, where its
        look would take the slot an add of this process is about to hand its job to (see
        ``engine.local``); when waiting already, that look is as good as the one its
        drain delay would bring, which is put off (a queue whose jobs all come from this
        process's adds never looks again in vain). Nothing is done when anything changed
        since ``mark`` (a marker popped, a fetch ended, a slot came back...): the
        fetcher's view is newer."""
        with self._cv:
            if (self._changed, self._looks) == mark and id(w) in self._workers \
                    and (id(w) in self._ready or id(w) in self._drain):
                self._wait_for_marker(w, time.monotonic(), next_delayed)

    def start_block(self) -> Tuple[List[str], float]:
        """The fetcher, about to block: the first shard's markers to wait on and for how
        long (until the next queue is due or a drain delay ends)."""
        now = time.monotonic()
        with self._cv:
            times = [at for k, at in self._ready.items() if self._fetchable(self._workers[k])]
            times.append(self._next_drain)
            timeout = min(min(times) - now, self.longest_block)
            if self._changed != self._seen:   # changed since take_due: look again first
                timeout = 0.0
            if self._watchers:                # the watchers wait on every marker
                return [], max(timeout, 0.0)
            markers = list(dict.fromkeys(self._waiting[0].values()))
            self._fetch_blocked = bool(markers) and timeout > 0.001
            self._stale.discard(0)
            return markers, max(timeout, 0.0)

    def start_watch(self, shard: int) -> List[str]:
        """A marker watcher, about to block (up to ``longest_block``): its markers."""
        with self._cv:
            markers = list(dict.fromkeys(self._waiting[shard].values()))
            if markers:
                self._blocked.add(shard)
            self._stale.discard(shard)
            return markers

    def end_block(self, shard: Optional[int]) -> None:
        """A blocker's BZPOPMIN returned (``shard`` None: the fetcher's)."""
        with self._cv:
            if shard is None:
                self._fetch_blocked = False
            else:
                self._blocked.discard(shard)

    def idle_watch(self, shard: int) -> None:
        """A watcher with no marker to wait on: until its shard's markers change."""
        with self._cv:
            self._cv.wait_for(lambda: shard in self._stale or self._stop.is_set(), IDLE_WAIT)

    def idle_wait(self, timeout: float) -> None:
        """The fetcher, with no marker to wait on: until a change since ``take_due``."""
        with self._cv:
            self._cv.wait_for(lambda: self._changed != self._seen or self._stop.is_set(),
                              min(timeout, IDLE_WAIT))

    def wait_membership_change(self, timeout: float) -> None:
        """A periodic role's pause: ends early when a worker comes or goes."""
        with self._membership:
            seen = self._members
            self._membership.wait_for(lambda: self._members != seen or self._stop.is_set(),
                                      timeout)

    def membership(self, seen: int) -> Tuple[int, List["Worker"]]:
        """The membership count (bumped when a worker comes or goes) and, when it is not
        ``seen``, the workers (else none: a periodic role looks only after a change)."""
        members = self._members            # (a hint, read again under the lock)
        if members == seen:
            return seen, []
        with self._cv:
            return self._members, list(self._workers.values())

    def marker_fired(self, marker: str) -> None:
        """A blocker popped ``marker``: its queues are looked at now (a watcher's pop
        wakes the fetcher, which may be blocked on its own shard)."""
        with self._cv:
            for w in self._owners.get(marker, []):
                if id(w) in self._drain:      # a ready one (rate limited...) keeps its time
                    self._set_ready(w, 0.0)
                else:                         # its fetch may be under way: see fetched()
                    self._fired.add(id(w))
            self._touch()
            wakes = self._wakes_due(None)
        self._send_wakes(wakes)

    def _touch(self) -> None:
        """Under ``_cv``: something changed."""
        self._changed += 1
        self._cv.notify_all()

    def changed(self, worker: "Worker", *, by_redis: bool = True) -> None:
        """A worker's slots, pause or state changed (or a thread was freed): the
        fetcher reconsiders it now, woken in Redis if need be. ``by_redis=False`` (a
        close, which must not wait on Redis): a block is cut on this side instead."""
        with self._cv:
            if id(worker) in self._workers:   # its marker is waited on only while it may fetch
                self._listen(worker)
            self._touch()
            wakes = self._wakes_due(worker)
        if by_redis:
            self._send_wakes(wakes)
        else:
            self._interrupt(wakes)

    def _wakes_due(self, worker: "Optional[Worker]") -> List[Optional[int]]:
        """Under ``_cv``: the blockers to wake, each once per block: the watchers whose
        markers changed, and the fetcher (None) when ``worker`` (or a queue starved
        of threads) is now due, or when it blocks on markers it no longer should."""
        wakes: List[Optional[int]] = [shard for shard in self._blocked if shard in self._stale]
        self._blocked.difference_update(wakes)
        if self._fetch_blocked:
            now = time.monotonic()
            candidates = [worker] if worker is not None else [
                self._workers[k] for k in self._ready]
            due = any(self._ready.get(id(w), now + 1) <= now and self._fetchable(w)
                      for w in candidates)
            if (due or 0 in self._stale or self._watchers
                    or (self._starved and self._threads_free > 0)):
                self._fetch_blocked = False
                wakes.append(None)
        return wakes

    def _send_wakes(self, shards: List[Optional[int]]) -> None:
        if not shards:
            return
        try:
            pipe = self.connection.client.pipeline(transaction=False)
            for shard in shards:
                key = self.wake_key_of(shard)
                pipe.zadd(key, {"wake": 0})
                pipe.pexpire(key, WAKE_TTL_MS)
            pipe.execute()
        except Exception:  # noqa: BLE001 - Redis unreachable: cut the blocks instead
            log.debug("engine %s: wake by Redis failed; interrupting", self.label,
                      exc_info=True)
            self._interrupt(shards)

    def _interrupt(self, shards: List[Optional[int]]) -> None:
        """Cut the blocks of ``shards`` (None: the fetcher's) on this side, with no call
        to Redis (they read again at once)."""
        for shard in shards:
            blocker = self._fetcher if shard is None else self._watchers.get(shard)
            if blocker is not None:
                blocker.interrupt()


def _conditions() -> Tuple[threading.Condition, threading.Condition]:
    """The engine's two conditions over one lock: changes the fetcher and the watchers
    wait for (every slot freed), and membership changes the periodic roles wait for
    (so that a slot freed wakes only those who care)."""
    lock = threading.Lock()
    return threading.Condition(lock), threading.Condition(lock)
