"""QueueEvents: a thread (or a few) tailing the events streams of one or many queues.

One ``XREAD BLOCK`` covers many queues: a process needs one events thread for up to
``SHARD_SIZE`` queues, and a few for thousands (an XREAD costs Redis time in
proportion to the streams it names, and is sent again after every entry, so the
streams are shared out over up to ``MAX_SHARDS`` threads). Listeners run on those
threads and must not block; ``wait_for_job`` settles futures from them.

With no listener, a thread whose waiters all wait for jobs a Worker of this process
holds rests, reading every ``REST`` seconds instead of after every event (see
``waits.expect``): the Worker settles them as it writes.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

from . import errors
from .base import fork
from .base import validate as check
from .base.shards import deal
from .base.util import loads
from .engine.local import LOCAL, server_of
from .keys import QueueKeys
from .store.cluster import check_queue
from .store.connect import as_connection
from .store.connection import ConnectionLike, as_fields, entry_event
from .waits.event_entry import UNKNOWN_RUN, QueueEvent, settle_from_event, stream_id
from .waits.event_tailer import Tailer
from .waits.expect import REST, Expectations, rest_left
from .waits.futures import result_or_named_timeout, settle, wait_timeout

__all__ = ["QueueEvent", "QueueEvents"]

OUTCOMES = frozenset(("completed", "failed"))
# on's listeners by event, on_event's listeners, _follow's listeners by event
Wanted = Tuple[Dict[str, Tuple[Callable[..., Any], ...]], Tuple[Callable[[QueueEvent], Any], ...],
               Dict[str, Tuple[Callable[[QueueEvent], Any], ...]]]

log = logging.getLogger(__name__)

MAX_BLOCK = 3600.0   # longest XREAD BLOCK (its socket timeout is longer still)
SHARD_SIZE = 64      # streams per events thread before the next thread is started
MAX_SHARDS = 16      # at most this many threads; past SHARD_SIZE * MAX_SHARDS streams,
                     # the streams are dealt round-robin over them


class QueueEvents:
    """Tails ``{prefix}:{queue}:events`` for each watched queue.

    ``last_event_id="$"`` (default) delivers events written after the
    constructor returns; pass ``"0"`` to replay the stream.
    """

    def __init__(self, names: Union[str, Sequence[str]], connection: ConnectionLike = None, *,
                 prefix: str = "bull", last_event_id: str = "$", block_timeout: float = 1.0,
                 recent_outcomes: int = 4096, autorun: bool = True) -> None:
        queue_names = [names] if isinstance(names, str) else names
        if isinstance(queue_names, Mapping) or not isinstance(queue_names, (list, tuple)):
            check.bad_type("names", names, "a queue name or a list of queue names")
        for name in queue_names:
            QueueKeys(prefix, check.name(name, "names"))
        check.string(last_event_id, "last_event_id")
        block_timeout = check.seconds(block_timeout, "block_timeout", allow_none=False,
                                      maximum=MAX_BLOCK)
        if not block_timeout:
            check.bad_value("block_timeout", block_timeout, "must be > 0 seconds")
        check.integer(recent_outcomes, "recent_outcomes", minimum=1)
        check.boolean(autorun, "autorun")
        self.prefix = prefix
        self.connection = as_connection(connection)
        self._owns_connection = self.connection is not connection
        self.client = self.connection.client
        self.block_timeout = block_timeout
        self._last_event_id = last_event_id
        self._lock = threading.Lock()   # guards _streams, _wanted (its writes), _waiters, _generation...
        self._changed = threading.Condition(self._lock)   # streams added, positions advanced
        self._streams: Dict[str, Tuple[str, str]] = {}        # stream key -> (queue, last id)
        self._starts: Dict[str, Tuple[int, int]] = {}         # stream key -> read after this id
        self._shard_of: Dict[str, int] = {}                   # stream key -> its tailer's shard
        self._shard_keys: Dict[int, List[str]] = {}           # shard -> its stream keys
        self._added = 0             # streams ever added (deals out the shards)
        self._generation = 0        # bumped by add_queue; each tailer notes what it has read
        self._seen_generation: Dict[int, int] = {}            # by shard
        # who wants which events: (on's listeners by event, on_event's, _follow's by event;
        # _follow's never keep the thread awake). Replaced whole under _lock, never changed
        # in place: the events thread reads it once per entry without the lock.
        self._wanted: Wanted = ({}, (), {})
        self._catching_up = 0       # catch_up calls under way
        # told of outcomes written by this process's workers when written (see _local);
        # the same event comes again from the stream
        self._written_listeners: List[Callable[[QueueEvent], Any]] = []
        # (queue, job id) -> [(future, stream id at registration)]: only outcomes written
        # after that id belong to the run the waiter is waiting for.
        self._waiters: Dict[Tuple[str, str], List[Tuple["Future[Any]", Tuple[int, int]]]] = {}
        # Outcomes seen lately, for waits that start after their job finished (and was
        # perhaps removed on completion): bounded, oldest dropped first.
        self._recent: "OrderedDict[Tuple[str, str], QueueEvent]" = OrderedDict()
        self._recent_max = recent_outcomes
        self._evicted = (0, 0)     # the highest stream id of an outcome dropped from _recent
        # what waiters (here, and _expect's) wait for, and whether Workers here hold it
        self._expectations = Expectations(prefix, server_of(self.connection))
        self._stop = threading.Event()
        self._tailers: Dict[int, Tailer] = {}    # by shard
        self._started = False
        self._closed = False
        self._restart = False          # started before a fork: restart on first use
        fork.track(self)
        for name in queue_names:
            self.add_queue(name)
        if autorun:
            self.start()

    def _after_fork_in_child(self) -> None:
        """The parent's waits are dropped unsettled (the parent settles them); the
        tailer comes back on first use (``start``, ``add_queue``, ``on``, ``job_future``)."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiters = {}
        self._expectations = Expectations(self.prefix, self._expectations.server)
        self._stop = threading.Event()
        self._restart = self._started and not self._closed
        self._started = False
        self._tailers = {}
        self._seen_generation = {}

    def resume_after_fork(self) -> None:
        """Restart the tailer of a QueueEvents started before this process forked."""
        if self._restart:
            self.start()

    # -- watched queues ----------------------------------------------------
    def _start_id(self, key: str) -> str:
        if self._last_event_id != "$":
            return self._last_event_id
        last = self.client.xrevrange(key, count=1)
        return cast(str, last[0][0]) if last else "0-0"

    def add_queue(self, name: str) -> None:
        """Watch one more queue; its events from now on are delivered."""
        key = QueueKeys(self.prefix, check.name(name, "name")).events
        check_queue(self.connection, self.prefix, name)
        self.resume_after_fork()
        with self._lock:
            if key in self._streams:
                return
        start = self._start_id(key)
        with self._lock:
            if key in self._streams:
                return
            self._streams[key] = (name, start)
            self._starts[key] = stream_id(start)
            shard = self._shard_of[key] = self._next_shard()
            self._shard_keys.setdefault(shard, []).append(key)
            self._generation += 1
            generation = self._generation
            self._changed.notify_all()
            tailer = self._tailers.get(shard)
        LOCAL.add_watcher(self, key)
        if tailer is None:
            if self._started:
                self._start_tailers()
        else:
            self._wake_tailer(tailer, generation)

    def _next_shard(self) -> int:
        """Under ``_lock``: the shard of the next stream added."""
        count, self._added = self._added, self._added + 1
        return deal(count, SHARD_SIZE, MAX_SHARDS)

    def _wake_tailer(self, tailer: Tailer, generation: int) -> None:
        """Interrupt ``tailer`` until it has read the streams of ``generation``: its XREAD
        in progress (or about to start) does not cover the new stream. Bounded; never
        from the tailer's own thread (a listener adding a queue)."""
        if tailer.is_current_thread():
            return
        shard = tailer.shard
        deadline = time.monotonic() + max(2.0, self.block_timeout)
        with self._lock:
            while (self._seen_generation.get(shard, 0) < generation
                   and not self._stop.is_set()):
                tailer.interrupt()
                if time.monotonic() > deadline:   # busy (a slow listener, a Redis outage):
                    log.debug("QueueEvents: the events thread reads the new queue when free")
                    return
                self._changed.wait(0.02)

    def _wait_for_queues(self, shard: int) -> None:
        """Tailer with nothing to watch: sleep until a queue is added (or stop)."""
        with self._lock:
            seen = self._seen_generation.get(shard, 0)
            self._changed.wait_for(lambda: self._generation != seen or self._stop.is_set(),
                                   self.block_timeout)

    def remove_queue(self, name: str) -> None:
        """Stop watching ``name``: its events are no longer delivered, and the pending
        waits on its jobs fail at once with ``ShutdownError`` (they would never settle)."""
        key = QueueKeys(self.prefix, name).events
        LOCAL.remove_watcher(self, key)
        with self._lock:
            self._streams.pop(key, None)
            self._starts.pop(key, None)
            shard = self._shard_of.pop(key, None)
            if shard is not None:
                self._shard_keys[shard].remove(key)
        self._fail_waits(name, f"QueueEvents no longer watches queue {name!r}")

    @property
    def queues(self) -> List[str]:
        """The names of the queues this listener watches."""
        with self._lock:
            return [queue for queue, _ in self._streams.values()]

    def _stream_positions(self, shard: int) -> Dict[str, str]:
        with self._lock:
            if self._seen_generation.get(shard) != self._generation:
                self._seen_generation[shard] = self._generation
                self._changed.notify_all()
            return {key: self._streams[key][1] for key in self._shard_keys.get(shard, ())}

    def catch_up(self, timeout: float) -> bool:
        """Wait (up to ``timeout`` seconds) until every event written so far to the
        watched streams has been delivered; False at the timeout."""
        with self._lock:
            keys = list(self._streams)
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.xrevrange(key, count=1)
        targets = {key: stream_id(last[0][0]) for key, last in zip(keys, pipe.execute())
                   if last}
        deadline = time.monotonic() + timeout

        def reached() -> bool:
            return all(key not in self._streams
                       or stream_id(self._streams[key][1]) >= target
                       for key, target in targets.items())

        with self._lock:
            self._catching_up += 1      # no rest until it is done
        self._wake_rest()
        try:
            with self._lock:
                while not reached():
                    left = deadline - time.monotonic()
                    if left <= 0 or self._stop.is_set() or not self._tailers:
                        return False
                    self._changed.wait(min(left, 0.1))
            return True
        finally:
            with self._lock:
                self._catching_up -= 1

    # -- listeners ---------------------------------------------------------
    def on(self, event: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn(job_id, value)``: value is the parsed ``returnvalue`` for completed, the
        ``failedReason`` for failed, the ``data`` for progress, and so on."""
        check.string(event, "event")
        check.function(fn, "fn")
        self.resume_after_fork()
        with self._lock:
            by_event, raw, followers = self._wanted
            self._wanted = ({**by_event, event: (*by_event.get(event, ()), fn)}, raw, followers)
        self._wake_rest()
        return fn

    def off(self, event: str, fn: Callable[..., Any]) -> None:
        """Remove a listener added with ``on`` (nothing when it is not there)."""
        with self._lock:
            by_event, raw, followers = self._wanted
            if fn in by_event.get(event, ()):
                left = list(by_event[event])
                left.remove(fn)
                self._wanted = ({**by_event, event: tuple(left)}, raw, followers)

    def on_event(self, fn: Callable[[QueueEvent], Any]) -> Callable[[QueueEvent], Any]:
        """``fn(event)`` for every event of every watched queue (a ``QueueEvent``)."""
        check.function(fn, "fn")
        self.resume_after_fork()
        with self._lock:
            by_event, raw, followers = self._wanted
            self._wanted = (by_event, (*raw, fn), followers)
        self._wake_rest()
        return fn

    def _follow(self, fn: Callable[[QueueEvent], Any], events: Sequence[str]) -> None:
        """``fn(event)`` for each of these ``events``, for a listener that only settles
        what it registered with ``waits.expect``: it does not keep the thread from resting,
        so it may get an event up to ``REST`` seconds late while no expectation needs
        it sooner."""
        check.function(fn, "fn")
        self.resume_after_fork()
        names = [check.string(name, "events") for name in events]
        with self._lock:
            by_event, raw, followers = self._wanted
            followers = dict(followers)
            for name in names:
                followers[name] = (*followers.get(name, ()), fn)
            self._wanted = (by_event, raw, followers)

    # -- resting (see _expect) -----------------------------------------------
    def _expect(self, owner: Any, jobs: Sequence[Tuple[str, str]]) -> None:
        """``owner`` (hashable: a future, a pending result) waits for an outcome that any
        of ``jobs`` ((queue name, job id)) held by a Worker of this process brings by
        its write. Until ``_unexpect(owner)``, the thread rests only while one is."""
        if not self._expectations.add(owner, jobs):
            self._wake_rest()

    def _unexpect(self, owner: Any) -> None:
        self._expectations.drop(owner)

    def _released(self, marker: str, job_ids: Sequence[str]) -> None:
        """A Worker here let these jobs go (see ``engine.local``)."""
        if self._expectations.names(marker, job_ids):
            self._wake_rest()

    def _wake_rest(self) -> None:
        """A resting thread reads again now (and rests again if it still may)."""
        with self._lock:
            tailers = list(self._tailers.values())
        for tailer in tailers:
            tailer.woken.set()

    def _rest(self, tailer: Tailer) -> Optional[bool]:
        """On ``tailer``'s thread: rest up to ``REST`` seconds if nothing needs events
        sooner. None: it may not; True: woken before the end; False: rested ``REST``."""
        tailer.woken.clear()       # before the check: a wake from now on ends the rest
        with self._lock:
            if self._catching_up or self._wanted[1] or any(self._wanted[0].values()):
                return None
        if not self._expectations.covered():
            return None
        return tailer.woken.wait(rest_left(tailer.shard, time.monotonic(), REST))

    def _deliver(self, stream: str, entries: List[Tuple[str, Dict[str, str]]]) -> None:
        """Entries read from ``stream``, in order: an outcome settles its waiters, each
        listener gets each event; then the stream's position moves past them. An event
        no listener asked for and no waiter needs costs nothing more here."""
        with self._lock:
            queue = self._streams.get(stream, (None, None))[0]
        if queue is None or not entries:
            return
        for entry_id, fields in entries:
            if self._stop.is_set():
                return          # closed (perhaps by a listener on this thread)
            name = entry_event(fields)
            by_event, raw, followers = self._wanted
            listeners = by_event.get(name, ())
            also = followers.get(name, ())
            outcome = name in OUTCOMES
            if not (outcome or listeners or raw or also):
                continue        # most entries, while nothing but waiters reads them
            flat = as_fields(fields)
            outcome = outcome and "jobId" in flat
            ev = QueueEvent(queue, name, flat.get("jobId"), flat, entry_id)
            if outcome:
                self._settle_waiters(ev)
            for fn in (*raw, *also):
                self._call(fn, ev)
            if listeners:
                value = ev.value
                for fn in listeners:
                    self._call(fn, ev.job_id, value)
        with self._lock:
            if stream in self._streams:
                self._streams[stream] = (queue, entries[-1][0])
                self._changed.notify_all()

    @staticmethod
    def _call(fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - a listener must not stop the events thread
            log.exception("QueueEvents listener %r failed", fn)

    # -- waiting for one job -----------------------------------------------
    def _settle_waiters(self, ev: QueueEvent) -> None:
        key = (ev.queue, ev.job_id or "")
        written = stream_id(ev.id)
        with self._lock:
            waiting = self._waiters.pop(key, [])
            futures = [fut for fut, floor in waiting if written > floor]
            earlier_run = [(fut, floor) for fut, floor in waiting if written <= floor]
            if earlier_run:     # this outcome was written before they began waiting
                self._waiters[key] = earlier_run
            self._recent[key] = ev
            self._recent.move_to_end(key)
            while len(self._recent) > self._recent_max:
                dropped = stream_id(self._recent.popitem(last=False)[1].id)
                self._evicted = max(self._evicted, dropped)
        for fut in futures:
            self._expectations.drop(fut)
            settle_from_event(fut, ev)

    def _settle_written(self, stream: str, entry_id: str, fields: Dict[str, str]) -> None:
        """A Worker of this process wrote a job's outcome (``fields``) to ``stream`` as
        ``entry_id`` (see ``engine.local``): its waiters settle now, as when this entry is
        read. Listeners still get it from the stream, once."""
        with self._lock:
            watched = self._streams.get(stream)
            if watched is None:
                return
            listeners = list(self._written_listeners)
        ev = QueueEvent(watched[0], fields["event"], fields["jobId"], fields, entry_id)
        self._settle_waiters(ev)    # remembered too: a wait may start after (the thread rests)
        for fn in listeners:
            self._call(fn, ev)

    def on_written(self, fn: Callable[[QueueEvent], Any]) -> Callable[[QueueEvent], Any]:
        """``fn(event)`` for each outcome (completed, failed) that a Worker of this process
        writes to a watched queue on the same Redis server, on the Worker's thread as
        its write returns: sooner than the same event read back from the stream, which
        ``on_event`` still gets, once. For settling something once per job (the event
        provider's ``emit`` futures); a listener that must see every event uses
        ``on_event``."""
        check.function(fn, "fn")
        with self._lock:
            self._written_listeners.append(fn)
        return fn

    def wait_for_job(self, queue: Any, job_id: str, timeout: Optional[float] = None) -> Any:
        """The job's return value once it completes; raises ``JobFailed`` if it fails,
        ``errors.TimeoutError`` after ``timeout`` seconds."""
        return self._wait(queue, job_id, timeout, None)

    def _wait(self, queue: Any, job_id: str, timeout: Optional[float],
              added_event: Optional[str]) -> Any:
        timeout = wait_timeout(timeout)
        fut = self._job_future(queue, job_id, added_event)
        try:
            return result_or_named_timeout(fut, timeout, f"queue {queue.name!r}", str(job_id))
        finally:
            self._forget(queue.name, job_id, fut)

    def job_future(self, queue: Any, job_id: str) -> "Future[Any]":
        """A future settled when the job's current run finishes (already settled if it
        has). Redis answers first: a remembered outcome is used only for a job whose hash
        is gone (removed on finishing), so a retried job or a reused id never gets the
        outcome of an earlier run."""
        return self._job_future(queue, job_id, None)

    def _job_future(self, queue: Any, job_id: str, added_event: Optional[str]) -> "Future[Any]":
        """``added_event``: the id of the "added" event of the run waited for, when this
        process added it; the run's outcome is then told apart without asking Redis
        (see ``_floor_of_added``)."""
        if self._closed:
            raise errors.ShutdownError("QueueEvents is closed")
        if not all(hasattr(queue, a) for a in ("name", "keys", "client", "get_job_state")):
            check.bad_type("queue", queue, "a Queue")
        job_id = check.job_id(job_id)
        self.resume_after_fork()
        fut: "Future[Any]" = Future()
        key = (queue.name, str(job_id))
        with self._lock:    # (checked as it registers: remove_queue fails what is registered)
            if all(watched != queue.name for watched, _ in self._streams.values()):
                raise errors.InvalidArgument(f"QueueEvents does not watch queue {queue.name!r}")
            floor = self._floor_of_added(queue, added_event)
            seen = self._recent.get(key)
            if floor is not None and seen is not None and stream_id(seen.id) > floor:
                floor = None   # it ended before the wait: Redis tells which run is current
            # without a floor: registered first, deaf until it knows which run it waits for
            self._waiters.setdefault(key, []).append(
                (fut, UNKNOWN_RUN if floor is None else floor))
        self._expect(fut, [key])
        if floor is not None:
            return fut
        state, returnvalue, failed_reason, floor = self._current_run(queue, str(job_id))
        if state == "unknown":   # gone (removed on finishing): any outcome of its id settles
            floor = (0, 0)       # it, even one written before the wait but not read yet
        with self._lock:
            seen = self._recent.get(key)
            for i, (waiting, _) in enumerate(self._waiters.get(key, ())):
                if waiting is fut:   # outcomes written up to ``floor`` are earlier runs'
                    self._waiters[key][i] = (fut, floor)
        if seen is not None and stream_id(seen.id) > floor:
            settle_from_event(fut, seen)      # delivered while the run was being read
        elif state == "completed":
            settle(fut, result=loads(returnvalue))
        elif state == "failed":
            settle(fut, exc=errors.JobFailed(failed_reason or "", str(job_id)))
        elif state == "unknown" and seen is not None:
            settle_from_event(fut, seen)
        if fut.done():
            self._forget(queue.name, str(job_id), fut)
        return fut

    def _floor_of_added(self, queue: Any,
                        added_event: Optional[str]) -> Optional[Tuple[int, int]]:
        """Under ``_lock``: the id of the run's "added" event when it tells the run's
        outcome apart without Redis: the stream is read from before it, and no outcome
        read after it has been dropped from ``_recent``, so an outcome of the run is in
        ``_recent`` (read already) or still to be read."""
        start = self._starts.get(queue.keys.events)
        if added_event is None or start is None:
            return None
        added = stream_id(added_event)
        return added if start <= added and self._evicted < added else None

    def _current_run(self, queue: Any, job_id: str) -> Tuple[str, Any, Any, Tuple[int, int]]:
        """The job's state, returnvalue and failedReason, and the events stream's last id,
        read atomically (one script call): a finish of the current run is written after
        that id."""
        state, returnvalue, failed_reason, last = queue.scripts.run(
            "currentRun", [queue.keys.base, queue.keys.events], [job_id])
        return str(state), returnvalue, failed_reason, stream_id(str(last))

    def _fail_waits(self, queue: Optional[str], message: str) -> None:
        """Fail the pending waits on jobs of ``queue`` (None: of every queue) with
        ``ShutdownError(message)``."""
        with self._lock:
            keys = [key for key in self._waiters if queue is None or key[0] == queue]
            waits = [fut for key in keys for fut, _ in self._waiters.pop(key)]
        for fut in waits:
            self._expectations.drop(fut)
            settle(fut, exc=errors.ShutdownError(message))

    def _forget(self, queue: str, job_id: str, fut: "Future[Any]") -> None:
        with self._lock:
            key = (queue, str(job_id))
            left = [w for w in self._waiters.get(key, ()) if w[0] is not fut]
            if left:
                self._waiters[key] = left
            else:
                self._waiters.pop(key, None)
        self._expectations.drop(fut)

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> "QueueEvents":
        """Start the events threads (idempotent; in a forked child, new ones)."""
        with self._lock:
            if self._closed:
                raise errors.ShutdownError("QueueEvents is closed")
            self._restart = False
            self._started = True
            streams = list(self._streams)
        LOCAL.add_events(self)
        for key in streams:         # (again after a fork: the child's registry is new)
            LOCAL.add_watcher(self, key)
        self._start_tailers()
        return self

    def _start_tailers(self) -> None:
        """One tailer per shard in use (shard 0 at least), each started once."""
        name = f"orijs-events-{','.join(self.queues)[:40]}"
        fresh = []
        with self._lock:
            if self._closed:
                return
            for shard in sorted(set(self._shard_of.values()) | {0}):
                if shard not in self._tailers:
                    tailer = self._tailers[shard] = Tailer(self, shard)
                    tailer.probe = self.client.ping      # read again as soon as Redis is back
                    fresh.append(tailer)
        for tailer in fresh:
            tailer.start(f"{name}#{tailer.shard}" if tailer.shard else name)

    def close(self) -> None:
        """Stop the threads (joined) and fail pending waits with ``ShutdownError``. From a
        listener, the thread it runs on is not joined: it ends as the listener returns,
        and no listener is called after ``close``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            tailers = list(self._tailers.values())
            streams = list(self._streams)
            self._stop.set()
            self._changed.notify_all()
        for key in streams:
            LOCAL.remove_watcher(self, key)
        LOCAL.remove_events(self)
        for tailer in tailers:
            tailer.halt()
        self._fail_waits(None, "QueueEvents closed")
        self._expectations.clear()
        if self._owns_connection:
            self.connection.close()

    def __enter__(self) -> "QueueEvents":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
