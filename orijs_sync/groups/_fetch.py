"""The group worker's fetcher role: reserves jobs for free handler slots, in batches
(one job per free group), blocking on the ready set when nothing is free to take."""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable, List, Optional

from .. import errors
from ..base.roles import Role
from ._manual import reserve_jobs
from .job import GroupJob

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue

log = logging.getLogger(__name__)

PAUSED_WAIT = 0.5         # seconds between looks at a paused queue


class Slots:
    """How many handler slots are free; the fetcher waits here (no polling)."""

    def __init__(self, size: int) -> None:
        self.free = size
        self.cv = threading.Condition()

    def take_all(self, stop: threading.Event) -> int:
        """Wait until a slot is free (or ``stop``); returns how many are free."""
        with self.cv:
            while self.free == 0 and not stop.is_set():
                self.cv.wait(1.0)
            return self.free

    def taken(self, n: int) -> None:
        with self.cv:
            self.free -= n

    def release(self) -> None:
        with self.cv:
            self.free += 1
            self.cv.notify_all()

    def wait_all_free(self, size: int, timeout: Optional[float]) -> bool:
        """Wait until every slot is free again (the worker's jobs all finished)."""
        with self.cv:
            return self.cv.wait_for(lambda: self.free >= size, timeout)

    def wake(self) -> None:
        with self.cv:
            self.cv.notify_all()


class Fetcher(Role):
    name = "group-fetcher"

    def __init__(self, stop_event: threading.Event, queue: "GroupQueue",
                 new_token: Callable[[], str], slots: Slots,
                 dispatch: Callable[[List[GroupJob]], None], block_timeout: float) -> None:
        super().__init__(stop_event)
        self.queue = queue
        self.new_token = new_token          # a token for each reservation (each run)
        self.slots = slots
        self.dispatch = dispatch
        self.block_timeout = block_timeout
        self.blocking = queue.connection.blocking_client(block_timeout)

    def reserve(self, n: int, preferred: str = "") -> List[GroupJob]:
        return reserve_jobs(self.queue, n, self.new_token(), preferred, self.queue.run_hot)

    def loop(self) -> None:
        free = self.slots.take_all(self.stop_event)
        if self.stop_event.is_set() or free == 0:
            return
        jobs = self.reserve(free)
        if not jobs:
            popped = self._block()
            if popped is None:
                return
            jobs = self.reserve(free, popped)
            if not jobs and self.queue.is_paused():
                self.stop_event.wait(PAUSED_WAIT)    # the group went back to ready: no spin
                return
        if jobs:
            self.slots.taken(len(jobs))
            self.dispatch(jobs)

    def _block(self) -> Optional[str]:
        """Block on the ready set until a group is there; returns it (now out of
        ready: the reserve that follows takes it, or leaves it to whatever frees it)."""
        try:
            popped = self.blocking.bzpopmin([self.queue.key("ready")], self.block_timeout)
        except errors.ConnectionError:
            if self.blocking.take_interrupt() or self.stop_event.is_set():
                return None
            raise
        return None if not popped else str(popped[1])      # (key, group, score)

    def interrupt(self) -> None:
        self.blocking.interrupt()

    def close(self) -> None:
        self.blocking.close()
