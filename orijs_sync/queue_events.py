"""QueueEvents: one thread tailing the events streams of one or many queues.

A single ``XREAD BLOCK`` covers every watched queue, so a process needs one
events thread however many queues it follows. Listeners run on that thread
and must not block; ``wait_for_job`` settles futures from it.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _fork, errors
from ._cluster import check_queue
from ._futures import result_or_named_timeout, settle
from ._roles import Role
from ._util import loads
from .connection import ConnectionLike, as_connection
from .keys import QueueKeys

log = logging.getLogger(__name__)

# The field each event carries as its "value" for on(event, fn(job_id, value)).
_VALUE_FIELD = {"completed": "returnvalue", "failed": "failedReason", "progress": "data",
                "delayed": "delay", "active": "prev", "waiting": "prev", "removed": "prev",
                "added": "name", "retries-exhausted": "attemptsMade",
                "deduplicated": "deduplicationId", "waiting-children": None, "stalled": None,
                "duplicated": None, "drained": None, "paused": None, "resumed": None,
                "cleaned": "count"}
_JSON_FIELDS = {"returnvalue", "data"}


@dataclass
class QueueEvent:
    """One entry of a queue's events stream."""

    queue: str
    event: str
    job_id: Optional[str]
    fields: Dict[str, str] = field(default_factory=dict)
    id: str = ""

    @property
    def value(self) -> Any:
        name = _VALUE_FIELD.get(self.event)
        if name is None:
            return None
        raw = self.fields.get(name)
        return loads(raw) if name in _JSON_FIELDS else raw


class _Tailer(Role):
    name = "events-tailer"

    def __init__(self, owner: "QueueEvents") -> None:
        super().__init__(owner._stop)
        self.owner = owner
        self.blocking = owner.connection.blocking_client(owner.block_timeout)

    def loop(self) -> None:
        self.blocking.take_interrupt()
        streams = self.owner._stream_positions()
        if not streams:
            self.stop_event.wait(self.owner.block_timeout)
            return
        try:
            reply = self.blocking.client.xread(streams, block=int(self.owner.block_timeout * 1000),
                                               count=1000)
        except errors.ConnectionError:
            if self.blocking.take_interrupt():
                return      # woken on purpose (a queue was added): read again at once
            raise
        for stream, entries in reply or ():
            for entry_id, fields in entries:
                self.owner._deliver(stream, entry_id, fields)

    def interrupt(self) -> None:
        self.blocking.interrupt()


class QueueEvents:
    """Tails ``{prefix}:{queue}:events`` for each watched queue.

    ``last_event_id="$"`` (default) delivers events written after the
    constructor returns; pass ``"0"`` to replay the stream.
    """

    def __init__(self, names: Union[str, Sequence[str]], connection: ConnectionLike = None, *,
                 prefix: str = "bull", last_event_id: str = "$", block_timeout: float = 1.0,
                 recent_outcomes: int = 4096, autorun: bool = True) -> None:
        self.prefix = prefix
        self.connection = as_connection(connection)
        self._owns_connection = self.connection is not connection
        self.client = self.connection.client
        self.block_timeout = block_timeout
        self._last_event_id = last_event_id
        self._lock = threading.Lock()   # guards _streams, _listeners, _waiters
        self._streams: Dict[str, Tuple[str, str]] = {}        # stream key -> (queue, last id)
        self._listeners: Dict[str, List[Callable[..., Any]]] = {}
        self._raw_listeners: List[Callable[[QueueEvent], Any]] = []
        self._waiters: Dict[Tuple[str, str], List[Future]] = {}
        # Outcomes seen lately, for waits that start after their job finished (and was
        # perhaps removed on completion): bounded, oldest dropped first.
        self._recent: "OrderedDict[Tuple[str, str], QueueEvent]" = OrderedDict()
        self._recent_max = recent_outcomes
        self._stop = threading.Event()
        self._tailer: Optional[_Tailer] = None
        self._closed = False
        self._restart = False          # started before a fork: restart on first use
        _fork.track(self)
        for name in [names] if isinstance(names, str) else list(names):
            self.add_queue(name)
        if autorun:
            self.start()

    def _after_fork_in_child(self) -> None:
        """The parent's waits are dropped unsettled (the parent settles them); the
        tailer comes back on first use (``start``, ``add_queue``, ``on``, ``job_future``)."""
        self._lock = threading.Lock()
        self._waiters = {}
        self._stop = threading.Event()
        self._restart = self._tailer is not None and not self._closed
        self._tailer = None

    def resume_after_fork(self) -> None:
        """Restart the tailer of a QueueEvents started before this process forked."""
        if self._restart:
            self.start()

    # -- watched queues ----------------------------------------------------
    def _start_id(self, key: str) -> str:
        if self._last_event_id != "$":
            return self._last_event_id
        last = self.client.xrevrange(key, count=1)
        return last[0][0] if last else "0-0"

    def add_queue(self, name: str) -> None:
        """Watch one more queue; its events from now on are delivered."""
        key = QueueKeys(self.prefix, name).events
        check_queue(self.connection, self.prefix, name)
        self.resume_after_fork()
        with self._lock:
            if key in self._streams:
                return
        start = self._start_id(key)
        with self._lock:
            self._streams.setdefault(key, (name, start))
        if self._tailer is not None:
            self._tailer.interrupt()   # its XREAD in progress does not cover the new stream

    def remove_queue(self, name: str) -> None:
        with self._lock:
            self._streams.pop(QueueKeys(self.prefix, name).events, None)

    @property
    def queues(self) -> List[str]:
        with self._lock:
            return [queue for queue, _ in self._streams.values()]

    def _stream_positions(self) -> Dict[str, str]:
        with self._lock:
            return {key: last for key, (_, last) in self._streams.items()}

    # -- listeners ---------------------------------------------------------
    def on(self, event: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn(job_id, value)``: value is the parsed ``returnvalue`` for completed, the
        ``failedReason`` for failed, the ``data`` for progress, and so on."""
        self.resume_after_fork()
        with self._lock:
            self._listeners.setdefault(event, []).append(fn)
        return fn

    def off(self, event: str, fn: Callable[..., Any]) -> None:
        with self._lock:
            if fn in self._listeners.get(event, []):
                self._listeners[event].remove(fn)

    def on_event(self, fn: Callable[[QueueEvent], Any]) -> Callable[[QueueEvent], Any]:
        """``fn(event)`` for every event of every watched queue (a :class:`QueueEvent`)."""
        self.resume_after_fork()
        with self._lock:
            self._raw_listeners.append(fn)
        return fn

    def _deliver(self, stream: str, entry_id: str, flat: Dict[str, str]) -> None:
        with self._lock:
            queue, _ = self._streams.get(stream, (None, None))
            if queue is None:
                return
            self._streams[stream] = (queue, entry_id)
            listeners = list(self._listeners.get(flat.get("event", ""), ()))
            raw = list(self._raw_listeners)
        ev = QueueEvent(queue, flat.get("event", ""), flat.get("jobId"), flat, entry_id)
        if ev.event in ("completed", "failed") and ev.job_id is not None:
            self._settle_waiters(ev)
        for fn in raw:
            self._call(fn, ev)
        value = ev.value
        for fn in listeners:
            self._call(fn, ev.job_id, value)

    @staticmethod
    def _call(fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - a listener must not stop the events thread
            log.exception("QueueEvents listener %r failed", fn)

    # -- waiting for one job -----------------------------------------------
    def _settle_waiters(self, ev: QueueEvent) -> None:
        key = (ev.queue, ev.job_id or "")
        with self._lock:
            futures = self._waiters.pop(key, [])
            self._recent[key] = ev
            self._recent.move_to_end(key)
            while len(self._recent) > self._recent_max:
                self._recent.popitem(last=False)
        for fut in futures:
            _settle_from_event(fut, ev)

    def wait_for_job(self, queue: Any, job_id: str, timeout: Optional[float] = None) -> Any:
        """The job's return value once it completes; raises ``JobFailed`` if it fails,
        ``errors.TimeoutError`` after ``timeout`` seconds."""
        fut = self.job_future(queue, job_id)
        try:
            return result_or_named_timeout(fut, timeout, f"queue {queue.name!r}", str(job_id))
        finally:
            self._forget(queue.name, job_id, fut)

    def job_future(self, queue: Any, job_id: str) -> "Future[Any]":
        """A future settled when the job finishes (already settled if it has)."""
        if self._closed:
            raise errors.ShutdownError("QueueEvents is closed")
        if queue.name not in self.queues:
            raise ValueError(f"QueueEvents does not watch queue {queue.name!r}")
        self.resume_after_fork()
        fut: "Future[Any]" = Future()
        with self._lock:
            seen = self._recent.get((queue.name, str(job_id)))
            if seen is None:
                self._waiters.setdefault((queue.name, str(job_id)), []).append(fut)
        if seen is not None:
            _settle_from_event(fut, seen)
            return fut
        # The job may have finished before we registered: look once in Redis.
        fields = queue.client.hmget(queue.keys.job(job_id), "finishedOn", "returnvalue",
                                    "failedReason")
        state = queue.get_job_state(job_id) if fields[0] else None
        if state == "completed":
            settle(fut, result=loads(fields[1]))
        elif state == "failed":
            settle(fut, exc=errors.JobFailed(fields[2] or "", str(job_id)))
        return fut

    def _forget(self, queue: str, job_id: str, fut: "Future[Any]") -> None:
        with self._lock:
            futures = self._waiters.get((queue, str(job_id)))
            if futures and fut in futures:
                futures.remove(fut)
                if not futures:
                    del self._waiters[(queue, str(job_id))]

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> "QueueEvents":
        """Start the events thread (idempotent; in a forked child, a new one)."""
        name = f"orijs-events-{','.join(self.queues)[:40]}"
        with self._lock:
            if self._closed:
                raise errors.ShutdownError("QueueEvents is closed")
            self._restart = False
            if self._tailer is None:
                self._tailer = _Tailer(self)
                self._tailer.start(name)
        return self

    def close(self) -> None:
        """Stop the thread (joined) and fail pending waits with ``ShutdownError``."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._tailer is not None:
            self._tailer.interrupt()
            while not self._tailer.join(0.2):
                self._tailer.interrupt()
            self._tailer.blocking.close()
        with self._lock:
            waiters, self._waiters = self._waiters, {}
        for futures in waiters.values():
            for fut in futures:
                settle(fut, exc=errors.ShutdownError("QueueEvents closed"))
        if self._owns_connection:
            self.connection.close()

    def __enter__(self) -> "QueueEvents":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _settle_from_event(fut: "Future[Any]", ev: QueueEvent) -> None:
    if ev.event == "completed":
        settle(fut, result=ev.value)
    else:
        settle(fut, exc=errors.JobFailed(ev.fields.get("failedReason", ""), ev.job_id))
