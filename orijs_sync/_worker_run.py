"""``Worker.run()``: start (waiting for Redis as long as it takes, or ``connect_timeout``),
block until SIGINT/SIGTERM, close; a second signal cuts the running jobs off."""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from . import errors
from .base import validate as check
from .base.roles import run_until_signalled, start_when_redis_answers
from .base.util import Seconds

if TYPE_CHECKING:  # pragma: no cover
    from .engine.children import ChildPool
    from .job import Job
    from .store.connection import RedisConnection

log = logging.getLogger("orijs_sync.worker")


class RunMixin:
    """What ``run()`` needs of a Worker (its attributes, set by ``Worker.__init__``)."""

    name: str
    connection: "RedisConnection"
    max_reconnect_delay: float
    _shutdown_requested: threading.Event
    _children: "Optional[ChildPool]"
    _cv: threading.Condition
    _active: "Dict[str, Job]"

    if TYPE_CHECKING:  # pragma: no cover - Worker's own
        def start(self) -> Any:
            raise NotImplementedError

        def close(self, timeout: Optional[float] = None) -> bool:
            raise NotImplementedError

    def run(self, connect_timeout: Optional[Seconds] = None) -> None:
        """Start and block until SIGINT/SIGTERM (or ``close()`` from another thread).
        Until Redis answers, start is retried: at once, then after a logged pause that
        grows to ``max_reconnect_delay``; after ``connect_timeout`` seconds (default:
        never) ``errors.TimeoutError`` is raised."""
        timeout = check.seconds(connect_timeout, "connect_timeout")
        run_until_signalled(lambda: self._start_when_redis_answers(timeout), self.close,
                            self._shutdown_requested, self._cut_off)

    def _cut_off(self) -> None:
        """A second shutdown signal: in process mode the running jobs' children are killed
        now, their jobs back to wait; handler threads cannot be stopped (close() waits)."""
        children = self._children
        if children is not None:
            log.warning("worker %s: a second signal: stopping the running jobs now (back to "
                        "wait)", self.name)
            children.kill_busy()
        else:
            log.warning("worker %s: a second signal: handler threads cannot be stopped; "
                        "waiting for the running jobs", self.name)

    def _give_back_running(self) -> List[str]:
        """A cold shutdown in thread mode: every job a handler thread still runs goes
        back to wait now, by its lock token (``Job.move_to_wait``: no attempt counted).
        The threads are not stopped (the process exits next); an outcome one writes
        later is refused, its lock being gone. Returns the ids moved back (none in
        process mode: there ``_cut_off`` kills the children instead)."""
        if self._children is not None:
            return []
        with self._cv:
            running = list(self._active.values())
        moved = []
        for job in running:
            try:
                job.move_to_wait(job.token or "")
            except errors.OrijsError as exc:     # finished meanwhile, or its lock lost
                log.warning("worker %s: job %s not moved back to wait: %s", self.name,
                            job.id, exc, extra={"queue": self.name, "job_id": job.id})
                continue
            log.warning("worker %s: job %s (%s) cut off, moved back to wait", self.name,
                        job.id, job.name, extra={"queue": self.name, "job_id": job.id,
                                                 "job_name": job.name})
            moved.append(job.id)
        return moved

    def _cold_stop(self, timeout: Optional[float]) -> None:
        """A cold shutdown (the CLI's): the running jobs back to wait now. In process
        mode their children are killed (``_cut_off``) and ``close()`` waits, up to
        ``timeout``, for the worker's threads to give the jobs back; in thread mode
        ``_give_back_running``."""
        if self._children is not None:
            self._cut_off()
            self.close(timeout)
        else:
            self._give_back_running()

    def _start_when_redis_answers(self, timeout: Optional[float]) -> bool:
        """``start()`` until it succeeds (True) or a shutdown is requested (False)."""
        return start_when_redis_answers(self.start, self._shutdown_requested, timeout,
                                        self.max_reconnect_delay, f"worker {self.name}",
                                        self.connection.address)
