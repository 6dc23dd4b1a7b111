"""Short cuts between the objects of one process that use the same Redis server.

Redis stays the only record: every short cut below writes exactly what the long way
writes, and the long way still runs beside it. What is saved is a wake.

- ``Queue.add`` of a job that a Worker of this process could take now, and
  ``FlowProducer.add`` of a flow whose leaves are such jobs: the add's own script
  call takes one (the oldest job waiting, as a fetch would) for each Worker a slot
  was reserved on first (a ``Handing``), and the job goes to that Worker's
  handler pool. No marker wakes the Worker's fetcher, which would take it with a
  second round trip.
- A job's outcome written by a Worker of this process settles the waiters of that
  job in every ``QueueEvents`` of this process watching its queue, when the write
  returns, with the id of the outcome's event in the stream (so a waiter tells the
  run it waits for apart exactly as when its events thread reads that entry, later).
- While every waiter of a ``QueueEvents`` waits for a job a Worker here holds, its
  events thread rests (see ``waits.expect``); a Worker letting a job go (``released``)
  or closing wakes it.

A server is told by its address (``[user@]host:port/db`` or a unix socket): a
cluster or a Sentinel-managed primary has no fixed one and takes the long way.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..base import fork
from ..base.util import now_ms
from ..store.connection import RedisConnection

if TYPE_CHECKING:  # pragma: no cover
    from ..queue_events import QueueEvents
    from ..worker import Worker

_Key = Tuple[str, str]     # (server address, Redis key)


def server_of(connection: Any) -> Optional[str]:
    """The server a connection names, or None when it names no fixed one."""
    if type(connection) is not RedisConnection:
        return None
    return str(connection.address)


class _Registry:
    """The Workers (by queue marker) and QueueEvents (by events stream) of this
    process, per server. One lock guards both maps; nothing is called under it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: Dict[_Key, List["Worker"]] = {}
        self._watchers: Dict[_Key, List["QueueEvents"]] = {}
        self._events: Dict[str, List["QueueEvents"]] = {}    # by server: may rest
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """A child has none of its parent's running Workers or events threads."""
        self._lock = threading.Lock()
        self._workers = {}
        self._watchers = {}
        self._events = {}

    # -- workers -------------------------------------------------------------
    def add_worker(self, worker: "Worker") -> None:
        server = server_of(worker.connection)
        if server is not None:
            _add(self._lock, self._workers, (server, worker.keys.marker), worker)

    def remove_worker(self, worker: "Worker") -> None:
        server = server_of(worker.connection)
        if server is not None:
            _drop(self._lock, self._workers, (server, worker.keys.marker), worker)
            for events in self._events_of(server):
                events._wake_rest()       # what it held is no longer covered

    def holds(self, server: str, marker: str, job_id: str) -> bool:
        """A Worker of this process serving ``marker``'s queue on ``server`` has the
        job active (taken, not yet written or let go)."""
        with self._lock:
            workers = list(self._workers.get((server, marker), ()))
        return any(worker._holds(job_id) for worker in workers)

    def released(self, connection: Any, marker: str, job_ids: Sequence[str]) -> None:
        """A Worker let these jobs go (written, retried, lost...): a QueueEvents resting
        on one of them reads again."""
        if not self._events:
            return
        server = server_of(connection)
        if server is None:
            return
        for events in self._events_of(server):
            events._released(marker, job_ids)

    def taker(self, connection: Any, marker: str) -> "Optional[Worker]":
        """A Worker of this process serving ``marker``'s queue on the same server, with
        a slot (and a handler thread) reserved for one job; None when none is free."""
        if not self._workers:
            return None
        server = server_of(connection)
        if server is None:
            return None
        with self._lock:
            workers = list(self._workers.get((server, marker), ()))
        return reserve_one(workers)

    # -- events threads --------------------------------------------------------
    def add_events(self, events: "QueueEvents") -> None:
        server = server_of(events.connection)
        if server is not None:
            _add(self._lock, self._events, server, events)

    def remove_events(self, events: "QueueEvents") -> None:
        server = server_of(events.connection)
        if server is not None:
            _drop(self._lock, self._events, server, events)

    def _events_of(self, server: str) -> "List[QueueEvents]":
        with self._lock:
            return list(self._events.get(server, ()))

    # -- watchers ------------------------------------------------------------
    def add_watcher(self, events: "QueueEvents", stream: str) -> None:
        server = server_of(events.connection)
        if server is not None:
            _add(self._lock, self._watchers, (server, stream), events)

    def remove_watcher(self, events: "QueueEvents", stream: str) -> None:
        server = server_of(events.connection)
        if server is not None:
            _drop(self._lock, self._watchers, (server, stream), events)

    def finished(self, connection: Any, stream: str, entry_id: str,
                 fields: Callable[[], Dict[str, str]]) -> None:
        """An outcome event (``fields()``, made only when a QueueEvents here watches
        ``stream``) was written to ``stream`` as ``entry_id`` by a call whose reply this
        process holds: the waiters of its job settle now."""
        if not self._watchers:
            return
        server = server_of(connection)
        if server is None:
            return
        with self._lock:
            watchers = list(self._watchers.get((server, stream), ()))
        if watchers:
            event = fields()
            for events in watchers:
                events._settle_written(stream, entry_id, event)


def reserve_one(workers: Iterable["Worker"]) -> "Optional[Worker]":
    """The first of ``workers`` with a slot (and a handler thread) free, one reserved
    for a job a script call is to take for it; None when none has one."""
    for worker in workers:
        if worker._take_slots(1):
            return worker
    return None


class Handing:
    """The Workers of this process one add's script call is to take a job for, in
    order, a slot reserved on each, with the options of each take (``moveToActive``'s,
    ``ts`` and whatever the script needs to know where to take it). After the call,
    ``hand`` gives each Worker what was taken for it (a slot with nothing comes
    back); a call that fails gives every slot back with ``cancel``."""

    def __init__(self) -> None:
        self.workers: List["Worker"] = []
        self.takes: List[Dict[str, Any]] = []

    def reserve(self, connection: Any, marker: str, **where: Any) -> bool:
        """One more take, when a Worker of ``marker``'s queue on that server is free."""
        worker = LOCAL.taker(connection, marker)
        if worker is None:
            return False
        self.workers.append(worker)
        self.takes.append(dict(worker._runner.fetch_opts(1), ts=now_ms(), **where))
        return True

    def hand(self, taken: Sequence[List[Any]]) -> None:
        """``taken[i]``: the jobs (none or one, as moveToActive returns them) taken for
        the i-th Worker."""
        for i, worker in enumerate(self.workers):
            worker._handed(taken[i] if i < len(taken) else [])

    def cancel(self) -> None:
        """The call failed: it may have run, its reply lost (see ``LostTakes``)."""
        for worker, take in zip(self.workers, self.takes):
            worker._runner.lost.failed(take, 1)
            worker._give_back_slots(1)
            worker._look_again()


def _add(lock: threading.Lock, table: Dict[Any, List[Any]], key: Any, item: Any) -> None:
    """``item`` listed under ``key`` once (registering again is harmless)."""
    with lock:
        items = table.setdefault(key, [])
        if item not in items:
            items.append(item)


def _drop(lock: threading.Lock, table: Dict[Any, List[Any]], key: Any, item: Any) -> None:
    with lock:
        items = table.get(key, [])
        if item in items:
            items.remove(item)
        if not items:
            table.pop(key, None)


LOCAL = _Registry()
