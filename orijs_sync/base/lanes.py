"""Lanes: a few threads owned by a provider, each running its tasks one at a time, in
the order they came. Two uses:

- the providers' *senders*: ``emit()`` and ``execute()`` hand the Redis part of the
  call (add the job or the flow, and what goes with it) to a lane and return their
  Future at once, so a Redis that holds traffic (a network black hole) never holds the
  caller past the Future's deadline. A caller thread's calls all go to one lane (its
  thread id picks it): one thread's emits are added in the order it made them, as
  when it added them itself; calls of different threads run side by side.
- the providers' *callback lane*: done-callbacks of the Futures they hand out
  (``add_done_callback``, ``subscribe``, ``catch``) that a library thread settles run
  there, in order, never on a worker's handler thread (whose slot they would hold)
  nor on a thread ``stop()`` joins. A callback may wait for another Future (results
  are set by the threads that settle them, not by this lane); it may call ``stop()``.

Threads start on first use. Each task runs in a copy of its submitter's
``contextvars`` context. ``close()`` drops what is queued (each task's ``on_drop`` is
called) or runs it first (``drain=True``), then joins every lane until a deadline,
except the calling thread itself when it is one of them (a callback calling
``stop()``): that lane ends as soon as its task returns.
"""
from __future__ import annotations

import contextvars
import logging
import queue
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import fork
from .pools import join_threads

log = logging.getLogger(__name__)

Task = Tuple[contextvars.Context, Callable[[], Any], Optional[Callable[[], Any]]]


class _Lane:
    __slots__ = ("tasks", "thread")

    def __init__(self) -> None:
        # a C queue: a put wakes the lane's thread with no lock handed back and forth
        self.tasks: "queue.SimpleQueue[Optional[Task]]" = queue.SimpleQueue()
        self.thread: Optional[threading.Thread] = None


class Lanes:
    """Up to ``count`` threads named ``name-<n>``; see the module docstring."""

    def __init__(self, name: str, count: int = 1) -> None:
        self.name = name
        self.count = count
        self._lock = threading.Lock()   # guards every field below
        self._lanes: Dict[int, _Lane] = {}
        self._closed = False
        self._pending = 0               # tasks queued or running
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The parent's queued tasks are the parent's: dropped, never run here; lanes
        restart on first use."""
        self._lock = threading.Lock()
        self._lanes = {}
        self._pending = 0

    def submit(self, fn: Callable[[], Any], on_drop: Optional[Callable[[], Any]] = None,
               key: Optional[int] = None) -> bool:
        """Queue ``fn()`` on the lane of ``key`` (default: the calling thread's id);
        False (nothing queued) once closed."""
        index = (threading.get_ident() if key is None else key) % self.count
        task: Task = (contextvars.copy_context(), fn, on_drop)
        with self._lock:
            if self._closed:
                return False
            lane = self._lanes.get(index)
            if lane is None:
                lane = self._lanes[index] = _Lane()
                lane.thread = threading.Thread(target=self._run, args=(lane,), daemon=True,
                                               name=f"{self.name}-{index}")
                lane.thread.start()
            self._pending += 1
            lane.tasks.put(task)      # under the lock: never after close()'s end mark
        return True

    def idle(self) -> bool:
        """Nothing queued nor running (a test's way to know the calls given are done)."""
        with self._lock:
            return not self._pending

    def _run(self, lane: _Lane) -> None:
        while True:
            task = lane.tasks.get()
            if task is None:           # close()'s end mark
                return
            context, fn, _ = task
            try:
                context.run(fn)
            except Exception:  # noqa: BLE001 - one task must not end the lane
                log.exception("%s: task %r failed", self.name, fn)
            finally:
                with self._lock:
                    self._pending -= 1

    def close(self, deadline: Optional[float] = None, drain: bool = False) -> List[str]:
        """No new task from now on; queued tasks run first (``drain``) or are dropped
        (their ``on_drop`` called here); then join the lanes until the monotonic
        ``deadline``. Returns the names of lanes still running then. Idempotent."""
        dropped: List[Task] = []
        with self._lock:
            self._closed = True
            for lane in self._lanes.values():
                while not drain:
                    try:
                        task = lane.tasks.get_nowait()
                    except queue.Empty:
                        break
                    if task is not None:
                        dropped.append(task)
                lane.tasks.put(None)
            self._pending -= len(dropped)
            threads = [lane.thread for lane in self._lanes.values() if lane.thread is not None]
        for context, _, on_drop in dropped:
            if on_drop is not None:
                try:
                    context.run(on_drop)
                except Exception:  # noqa: BLE001
                    log.exception("%s: dropping task %r failed", self.name, on_drop)
        return join_threads(threads, deadline)
