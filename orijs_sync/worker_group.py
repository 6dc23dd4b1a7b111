"""WorkerGroup: many queues' Workers served by one set of threads and connections."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Dict, List, Optional

from . import errors
from .base import fork
from .base import validate as check
from .base.pools import deadline_of, remaining
from .engine.engine import Engine
from .store.connect import as_connection
from .store.connection import ConnectionLike, RedisConnection

if TYPE_CHECKING:  # pragma: no cover
    from .worker import Worker

UNBOUNDED = 10_000    # the pool's size when max_threads is None (threads are made lazily)
GROUP_BLOCK = 5.0     # longest single block of a group's fetcher (it blocks again after)


class WorkerGroup:
    """Runs any number of Workers (one per queue) on one engine: one fetcher blocking
    on every queue's marker at once, one finisher, one lock renewer, one stalled
    checker and one pool of handler threads. Each Worker
    keeps its queue's own semantics (concurrency, limiter, pause, lock duration,
    stalled checks, listeners), exactly as a Worker of its own::

        with WorkerGroup("redis://localhost:6379/0") as group:
            for name in names:
                Worker(f"event.{name}", handle, group=group, concurrency=10).start()
            ...                                   # 1 or 1,000 queues: the same threads

    Workers may start and close at any time. Handler threads are made as jobs run at
    once (each queue's ``concurrency`` bounds its own); ``max_threads`` also bounds the
    jobs running at once over all the queues: a queue is only fetched for while a
    thread is free. Beware of handlers that wait for other jobs of the same group
    (an event handler emitting and waiting): with every thread waiting, nothing runs
    the jobs waited for until their waits time out. Without ``max_threads`` a group
    runs as many jobs at once as its Workers would alone.
    A Worker of a group names its blocking connection after the group, so Node's
    ``getWorkers()`` of its queue does not list it (``Queue.get_workers`` neither).
    On a cluster the queues of one hash slot share an engine.
    """

    def __init__(self, connection: ConnectionLike = None, *,
                 max_threads: Optional[int] = None, name: str = "group") -> None:
        self.max_threads = (None if max_threads is None else
                            check.integer(max_threads, "max_threads", minimum=1, maximum=UNBOUNDED))
        self.name = check.name(name, "name")
        self.connection: RedisConnection = as_connection(connection)
        self._owns_connection = self.connection is not connection
        self._lock = threading.Lock()      # guards _engines, _workers, _closed
        self._engines: Dict[Optional[int], Engine] = {}   # by hash slot (None: one Redis)
        self._workers: List["Worker"] = []
        self._closed = False
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The parent's engines and workers stay the parent's; Workers created here
        join new engines."""
        self._lock = threading.Lock()
        self._engines = {}
        self._workers = []

    def _connection_for(self, connection: ConnectionLike) -> RedisConnection:
        """A Worker's connection in this group: the group's (or the same one given)."""
        if connection is not None and connection is not self.connection:
            check.bad_value("connection", connection,
                            "a Worker of a WorkerGroup uses the group's connection: "
                            "leave it out")
        return self.connection

    def _join(self, worker: "Worker") -> Engine:
        """Serve ``worker`` (Worker.start): by the engine of its slot, started if need be."""
        slot = (self.connection.client.keyslot(worker.keys.marker)  # type: ignore[attr-defined]
                if self.connection.is_cluster else None)
        while True:
            with self._lock:
                if self._closed:
                    raise errors.ShutdownError(f"worker group {self.name!r} is closed")
                engine = self._engines.get(slot)
                if engine is None or engine.stopped:
                    label = self.name if slot is None else f"{self.name}-{slot}"
                    engine = self._engines[slot] = Engine(
                        self.connection, label=label, max_threads=self.max_threads or UNBOUNDED,
                        anchor_key=worker.keys.marker, longest_block=GROUP_BLOCK,
                        client_name=f"orijs:group:{self.name}")
                if engine.add(worker):
                    self._workers.append(worker)
                    return engine

    def _left(self, worker: "Worker") -> None:
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)

    @property
    def workers(self) -> List["Worker"]:
        with self._lock:
            return list(self._workers)

    def close(self, timeout: Optional[float] = None) -> bool:
        """Close every Worker of the group (active jobs finish, all within ``timeout``
        seconds), which stops and joins the engines' threads. Idempotent; False if
        jobs were still running at the timeout."""
        deadline = deadline_of(check.seconds(timeout, "timeout"))
        with self._lock:
            self._closed = True
            workers = list(self._workers)
        closed = True
        for worker in workers:
            closed = worker.close(timeout=remaining(deadline)) and closed
        if self._owns_connection and closed:
            self.connection.close()
        return closed

    def __enter__(self) -> "WorkerGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SharedGroup:
    """The WorkerGroup of a component that starts Workers (the providers): the one
    given, or one made on first use and closed with the component."""

    def __init__(self, given: Optional[WorkerGroup], connection: ConnectionLike,
                 name: str) -> None:
        if given is not None and not isinstance(given, WorkerGroup):
            check.bad_type("worker_group", given, "a WorkerGroup")
        self._group = given
        self._owned = given is None
        self._connection = connection
        self._name = name
        self._lock = threading.Lock()     # guards _group
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        if self._owned:
            self._group = None            # the parent's; this process makes its own

    def options(self, worker_class: type) -> Dict[str, object]:
        """Where a new worker of ``worker_class`` runs: in the group for our Worker and
        its subclasses, on the connection for any other class."""
        from .worker import Worker
        if not (isinstance(worker_class, type) and issubclass(worker_class, Worker)):
            return {"connection": self._connection}
        with self._lock:
            if self._group is None:
                self._group = WorkerGroup(self._connection, name=self._name)
            return {"group": self._group}

    def workers(self) -> List["Worker"]:
        """The Workers running in the group (for a cold shutdown: the CLI gives their
        running jobs back); none before the first one started."""
        with self._lock:
            group = self._group
        return [] if group is None else group.workers

    def close(self, timeout: Optional[float] = None) -> None:
        """Close the group if it was made here (its workers are closed by then)."""
        with self._lock:
            group = self._group if self._owned else None
        if group is not None:
            group.close(timeout=timeout)
