"""The worker engine: one set of threads serving one or many Workers (queues).

A Worker keeps its queue's own state (slots, pause, limiter, active jobs, lock
duration, stalled pacing, listeners); its engine owns the threads that work for
every queue it serves (``_engine_roles``):

- one fetcher: moves jobs to active for the queues that may have some, else blocks
  in one ``BZPOPMIN`` over the markers of all the others and the engine's wake key;
- one finisher: writes outcomes many per script call, per queue;
- one lock renewer and one stalled checker, each paced per queue;
- one handler pool of at most ``max_threads`` threads (made as jobs run at once):
  a queue is only fetched for while a thread is free for its job.

A Worker started alone has an engine of its own (its threads, named after it). A
:class:`~orijs_sync.WorkerGroup` shares one engine between all its Workers (one per
hash slot on a cluster, whose multi-key ``BZPOPMIN`` stays within one slot).

Wakes: every change that may let the fetcher take jobs (a queue joins or resumes, a
slot or thread is freed) notifies the engine. A fetcher blocked in Redis is woken by
a push to its wake key, never by cutting its socket: a push that lands before the
``BZPOPMIN`` does makes it return at once, so no wake is lost in between.
"""
from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from . import _fork
from ._engine_roles import IDLE_WAIT, Fetcher, Finisher, PerQueue
from ._pools import join_threads
from ._roles import Role
from ._util import now_ms
from .connection import RedisConnection

if TYPE_CHECKING:  # pragma: no cover
    from .worker import Worker

log = logging.getLogger(__name__)

WAKE_TTL_MS = 60_000     # a wake nobody popped (its process died) expires


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
        # in the slot of the markers (it extends one of them), so one BZPOPMIN takes all
        self.wake_key = f"{anchor_key}:orijs-wake:{uuid.uuid4().hex}"
        self._stop = threading.Event()
        self._cv = threading.Condition()     # guards every field below
        self._workers: Dict[int, "Worker"] = {}   # by id()
        self._ready: Dict[int, float] = {}    # worker id -> monotonic time to try fetching
        self._drain: Dict[int, float] = {}    # worker id -> time its block times out
        self._next_drain = float("inf")       # earliest of _drain (or sooner)
        self._waiting: Dict[int, str] = {}    # worker id -> marker key
        self._owners: Dict[str, List["Worker"]] = {}   # marker key -> its workers
        self._blocking = False                # the fetcher blocks in Redis now
        self._stale = False                   # _waiting changed since that block began
        self._starved = False                 # a queue could fetch but for the thread cap
        self._changed = 0                     # bumped on every change (wakes waiters)
        self._members = 0                     # bumped when a worker comes or goes
        self._seen = 0                        # _changed as the fetcher last saw it
        self._threads_free = max_threads      # guarded by _slots_lock (a leaf lock)
        self._slots_lock = threading.Lock()
        self._state = "running"               # running -> stopped
        self.executor = ThreadPoolExecutor(max_threads,
                                           thread_name_prefix=f"orijs-worker-{label}")
        self.finisher = Finisher(self)
        self._fetcher = Fetcher(self)
        self._roles: List[Role] = [self._fetcher, self.finisher,
                                   PerQueue(self, "lock-renewer", stalled=False),
                                   PerQueue(self, "stalled-checker", stalled=True)]
        for role in self._roles:
            role.on_error = self._role_error  # type: ignore[method-assign]
            role.probe = connection.ping
        _fork.track(self)
        for role in self._roles:
            role.start(f"orijs-{role.name}-{label}")

    def _after_fork_in_child(self) -> None:
        """A forked child never runs its parent's engine: it is left stopped, empty."""
        self._cv = threading.Condition()
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
            self._owners.setdefault(worker.keys.marker, []).append(worker)
            self._set_ready(worker, 0.0)
            for role in self._roles:
                role.max_delay = min(w.max_reconnect_delay for w in self._workers.values())
            self._members += 1
            self._touch()
        self._wake(worker)
        return True

    def remove(self, worker: "Worker", drained: bool, deadline: Optional[float]) -> bool:
        """Stop serving ``worker`` (its outcomes not written yet are dropped unless
        ``drained``); the last one out stops the engine and joins its threads until
        ``deadline``. Returns True when this stopped the engine."""
        with self._cv:
            if self._workers.pop(id(worker), None) is None:
                return False
            self._forget_worker(worker)
            last = not self._workers and self._state == "running"
            if last:
                self._state = "stopped"
            self._members += 1
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
        me = threading.current_thread()
        for role in self._roles:
            if role.is_current_thread():
                continue
            role.interrupt()
            while not role.join(0.2):
                if deadline is not None and time.monotonic() > deadline:
                    log.warning("engine %s: %s did not stop in time", self.label, role.name)
                    break
                role.interrupt()
        threads = list(getattr(self.executor, "_threads", ()))
        self.executor.shutdown(wait=False)
        if drained and me not in threads:
            join_threads(threads, deadline)
        self._fetcher.blocking.close()

    # -- handler threads (the engine's slots) --------------------------------
    def take_threads(self, wanted: int) -> int:
        """Reserve up to ``wanted`` handler threads for jobs about to be taken."""
        with self._slots_lock:
            taken = min(wanted, self._threads_free)
            self._threads_free -= taken
            return taken

    def give_threads(self, count: int) -> None:
        with self._slots_lock:
            self._threads_free += count

    def threads_free(self) -> int:
        return self._threads_free

    # -- fetch scheduling ----------------------------------------------------
    # Every worker is either ready (``_ready``: fetch at that time, when it may) or
    # waiting on its marker (``_drain``: until its block times out). ``_waiting`` holds
    # the markers the fetcher blocks on: those of waiting workers that listen.
    def _set_ready(self, w: "Worker", at: float) -> None:
        """Under ``_cv``."""
        key = id(w)
        self._drain.pop(key, None)
        if self._waiting.pop(key, None) is not None:
            self._stale = True
        self._ready[key] = at

    def _set_waiting(self, w: "Worker", until: float) -> None:
        """Under ``_cv``."""
        key = id(w)
        self._ready.pop(key, None)
        self._drain[key] = until
        self._next_drain = min(self._next_drain, until)
        self._listen(w)

    def _listen(self, w: "Worker") -> None:
        """Under ``_cv``, for a waiting worker: its marker is waited on while it listens."""
        key = id(w)
        if w._listening():
            if key not in self._waiting:
                self._waiting[key] = w.keys.marker
                self._stale = True
        elif self._waiting.pop(key, None) is not None:
            self._stale = True

    def _forget_worker(self, w: "Worker") -> None:
        """Under ``_cv``."""
        for table in (self._ready, self._drain, self._waiting):
            table.pop(id(w), None)
        owners = self._owners.get(w.keys.marker, [])
        if w in owners:
            owners.remove(w)
        if not owners:
            self._owners.pop(w.keys.marker, None)
        self._stale = True

    def _fetchable(self, w: "Worker") -> bool:
        return w._can_fetch() and self._threads_free > 0

    def take_due(self) -> List["Worker"]:
        """The fetcher: the queues to fetch for now."""
        now = time.monotonic()
        with self._cv:
            self._seen = self._changed        # a change after this: no block (see below)
            if now >= self._next_drain:       # blocks timed out: look at those queues again
                expired = [k for k, until in self._drain.items() if until <= now]
                for key in expired:
                    self._set_ready(self._workers[key], 0.0)
                self._next_drain = min(self._drain.values(), default=float("inf"))
            ready = [self._workers[k] for k, at in self._ready.items()
                     if at <= now and self._workers[k]._can_fetch()]
            self._starved = bool(ready) and self._threads_free <= 0
            return [] if self._starved else ready

    def set_due(self, w: "Worker", at: float) -> None:
        with self._cv:
            if id(w) in self._workers:
                self._set_ready(w, at)

    def fetched(self, w: "Worker", full: bool, ttl: int, next_delayed: int) -> None:
        """After a fetch: a full take looks again at once; a rate limit after its ttl;
        else the queue waits on its marker until its drain delay (rounded up to the
        next whole second, so that many queues look again in one pipelined call) or
        its next delayed job."""
        now = time.monotonic()
        with self._cv:
            if id(w) not in self._workers:
                return
            if full or ttl > 0:
                self._set_ready(w, now + ttl / 1000.0)
                return
            until = float(math.ceil(now + w.drain_delay)) if w.drain_delay >= 1 else \
                now + w.drain_delay
            if next_delayed:
                until = min(until, now + max(next_delayed - now_ms(), 0) / 1000.0)
            self._set_waiting(w, until)

    def start_block(self) -> Tuple[List[str], float]:
        """The fetcher, about to block: the markers to wait on and for how long."""
        now = time.monotonic()
        with self._cv:
            times = [at for k, at in self._ready.items() if self._fetchable(self._workers[k])]
            times.append(self._next_drain)
            timeout = min(min(times) - now, self.longest_block)
            if self._changed != self._seen:   # changed since take_due: look again first
                timeout = 0.0
            markers = list(dict.fromkeys(self._waiting.values()))
            self._blocking = bool(markers) and timeout > 0.001
            self._stale = False
            return markers, max(timeout, 0.0)

    def end_block(self) -> None:
        with self._cv:
            self._blocking = False

    def idle_wait(self, timeout: float) -> None:
        """The fetcher, with no marker to wait on: until a change since ``take_due``."""
        with self._cv:
            self._cv.wait_for(lambda: self._changed != self._seen or self._stop.is_set(),
                              min(timeout, IDLE_WAIT))

    def wait_membership_change(self, timeout: float) -> None:
        """A periodic role's pause: ends early when a worker comes or goes."""
        with self._cv:
            seen = self._members
            self._cv.wait_for(lambda: self._members != seen or self._stop.is_set(), timeout)

    def marker_fired(self, marker: str) -> None:
        with self._cv:
            for w in self._owners.get(marker, []):
                self._set_ready(w, 0.0)

    def _touch(self) -> None:
        """Under ``_cv``: something changed."""
        self._changed += 1
        self._cv.notify_all()

    def changed(self, worker: "Worker") -> None:
        """A worker's slots, pause or state changed (or a thread was freed): the
        fetcher reconsiders it now."""
        with self._cv:
            if id(worker) in self._drain:     # its marker is waited on only while listening
                self._listen(worker)
            self._touch()
        self._wake(worker)

    def _wake(self, worker: "Worker") -> None:
        """Wake the fetcher blocked in Redis when ``worker`` (or a queue starved of
        threads) should now be fetched for, or the markers it waits on changed."""
        with self._cv:
            if not self._blocking:
                return                     # not in Redis: _touch's notify reached it
            at = self._ready.get(id(worker))
            due = at is not None and at <= time.monotonic() and self._fetchable(worker)
            freed = self._starved and self._threads_free > 0
            if not (due or freed or self._stale):
                return
            self._blocking = False         # one wake per block
        self._send_wake()

    def _send_wake(self) -> None:
        try:
            pipe = self.connection.client.pipeline(transaction=False)
            pipe.zadd(self.wake_key, {"wake": 0})
            pipe.pexpire(self.wake_key, WAKE_TTL_MS)
            pipe.execute()
        except Exception:  # noqa: BLE001 - Redis unreachable: cut the block instead
            log.debug("engine %s: wake by Redis failed; interrupting", self.label,
                      exc_info=True)
            self._fetcher.interrupt()

