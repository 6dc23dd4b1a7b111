"""``Worker.run()``: start (waiting for Redis as long as it takes, or ``connect_timeout``),
block until SIGINT/SIGTERM, close; a second signal cuts the running jobs off."""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

from . import errors
from .base import validate as check
from .base.roles import backoff_delay, run_until_signalled
from .base.util import Seconds

if TYPE_CHECKING:  # pragma: no cover
    from .engine.children import ChildPool
    from .store.connection import RedisConnection

log = logging.getLogger("orijs_sync.worker")


class RunMixin:
    """What ``run()`` needs of a Worker (its attributes, set by ``Worker.__init__``)."""

    name: str
    connection: "RedisConnection"
    max_reconnect_delay: float
    _shutdown_requested: threading.Event
    _children: "Optional[ChildPool]"

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

    def _start_when_redis_answers(self, timeout: Optional[float]) -> bool:
        """``start()`` until it succeeds (True) or a shutdown is requested (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while not self._shutdown_requested.is_set():
            try:
                self.start()
                return True
            except errors.InvalidStateError:
                if self._shutdown_requested.is_set():      # closed while starting
                    return False
                raise
            except errors.ConnectionError as exc:
                failures += 1
                delay = backoff_delay(failures, self.max_reconnect_delay)
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise errors.TimeoutError(
                            f"worker {self.name}: Redis at {self.connection.address} did not "
                            f"answer within {timeout:g}s ({exc})") from exc
                    delay = min(delay, left)
                log.warning("worker %s: waiting for Redis at %s (%s); next try in %.1fs",
                            self.name, self.connection.address, exc, delay)
                self._shutdown_requested.wait(delay)
        return False
