"""One timer thread with a heap: call functions at monotonic deadlines.

Shared by the event and workflow layers: completion and workflow timeouts (one
thread however many are pending), delayed cleanups, and the in-process
providers' delays, retries and schedules. Never a thread per timeout. Cancelling an entry
is O(1) (it is marked, not removed); the heap is rebuilt when half of it is
cancelled entries, so its size tracks the live entries and drops to zero when
nothing is pending.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from typing import Any, Callable, List, Optional

from .. import errors
from . import fork
from . import validate as check

log = logging.getLogger(__name__)

MAX_WAIT = check.MAX_SECONDS   # far below threading.TIMEOUT_MAX


class TimerHandle:
    """What ``Timer.call_later`` returns; pass it to ``Timer.cancel``."""

    __slots__ = ("deadline", "seq", "fn", "cancelled")

    def __init__(self, deadline: float, seq: int, fn: Callable[[], Any]) -> None:
        self.deadline = deadline
        self.seq = seq
        self.fn: Optional[Callable[[], Any]] = fn
        self.cancelled = False

    def __lt__(self, other: "TimerHandle") -> bool:
        return (self.deadline, self.seq) < (other.deadline, other.seq)


class Timer:
    """A daemon thread running callbacks at deadlines; callbacks must not block."""

    def __init__(self, name: str = "orijs-timer") -> None:
        self.name = name
        self._cond = threading.Condition()   # guards _heap, _stale, _stopped
        self._heap: List[TimerHandle] = []
        self._stale = 0
        # When the sleeping thread wakes by itself (-inf while it runs): an entry due
        # later needs no wake-up (one per emit woke it on the emitter's path)
        self._wakes_at = -math.inf
        self._seq = itertools.count()
        self._stopped = False
        self._started = False
        self._thread: Optional[threading.Thread] = None
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The parent's entries are the parent's to run: dropped. A started timer gets
        its thread back on the next ``call_later``."""
        self._cond = threading.Condition()
        self._heap = []
        self._stale = 0
        self._wakes_at = -math.inf
        self._thread = None

    def start(self) -> "Timer":
        with self._cond:
            if self._stopped:
                raise errors.ShutdownError(f"{self.name} is stopped")
            self._started = True
            self._ensure_thread()
        return self

    def _ensure_thread(self) -> None:
        """Under ``_cond``: the thread of a started timer (again, in a forked child)."""
        if self._thread is None and self._started:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def call_later(self, delay: float, fn: Callable[[], Any]) -> TimerHandle:
        """Run ``fn()`` on the timer thread after ``delay`` seconds."""
        delay = min(max(0.0, float(check.number(delay, "delay"))), MAX_WAIT)
        handle = TimerHandle(time.monotonic() + delay, next(self._seq), fn)
        with self._cond:
            if self._stopped:
                raise errors.ShutdownError(f"{self.name} is stopped")
            self._ensure_thread()
            heapq.heappush(self._heap, handle)
            if handle.deadline < self._wakes_at:
                self._cond.notify()
        return handle

    def cancel(self, handle: Optional[TimerHandle]) -> bool:
        """Cancel an entry that has not run; False if it ran or was cancelled already."""
        if handle is None:
            return False
        with self._cond:
            if handle.cancelled or handle.fn is None:
                return False
            handle.cancelled = True
            handle.fn = None  # drop references at once
            self._stale += 1
            if self._stale * 2 >= len(self._heap):
                self._heap = [h for h in self._heap if not h.cancelled]
                heapq.heapify(self._heap)
                self._stale = 0
            return True

    def __len__(self) -> int:
        """Live (not yet run, not cancelled) entries."""
        with self._cond:
            return len(self._heap) - self._stale

    @property
    def heap_size(self) -> int:
        """Entries held, cancelled ones included (for memory checks)."""
        with self._cond:
            return len(self._heap)

    def _run(self) -> None:
        while True:
            with self._cond:
                fn = None
                while fn is None:
                    if self._stopped:
                        return
                    if not self._heap:
                        self._sleep(math.inf)
                        continue
                    top = self._heap[0]
                    if top.cancelled:
                        heapq.heappop(self._heap)
                        self._stale -= 1
                        continue
                    if top.deadline > time.monotonic():
                        self._sleep(top.deadline)
                        continue
                    heapq.heappop(self._heap)
                    fn, top.fn = top.fn, None
            try:
                fn()
            except Exception:  # noqa: BLE001 - one callback must not stop the timer
                log.exception("%s: callback %r failed", self.name, fn)

    def _sleep(self, until: float) -> None:
        """Under ``_cond``, on the timer thread: wait until ``until`` (monotonic) or a
        wake-up, never longer than the OS allows."""
        self._wakes_at = min(until, time.monotonic() + MAX_WAIT)
        try:
            self._cond.wait(max(0.0, self._wakes_at - time.monotonic()))
        finally:
            self._wakes_at = -math.inf

    def stop(self) -> None:
        """Drop every entry without running it, stop the thread and join it."""
        with self._cond:
            self._stopped = True
            for handle in self._heap:
                handle.cancelled = True
                handle.fn = None
            self._heap = []
            self._stale = 0
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
