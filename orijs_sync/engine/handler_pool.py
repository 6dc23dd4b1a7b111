"""The engine's handler threads: made as jobs need them, up to ``max_threads``, each
taking the next job from one queue. ``ThreadPoolExecutor.submit`` made a Future, a
work item and a Python-level semaphore check for every job; on the finisher's path
that was a sixth of the process's GIL time at concurrency 16 (bench/RESULTS.md)."""
from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable, List, Optional, Tuple

log = logging.getLogger(__name__)

Task = Optional[Tuple[Callable[[Any], Any], Any]]     # None: a thread's signal to end


class HandlerPool:
    """``submit(fn, arg)`` runs ``fn(arg)`` on a pool thread; ``shutdown()`` lets the
    tasks already submitted run, then ends the threads. Thread-safe."""

    def __init__(self, max_threads: int, name_prefix: str) -> None:
        self._max = max_threads
        self._prefix = name_prefix
        self._tasks: "queue.SimpleQueue[Task]" = queue.SimpleQueue()
        self._lock = threading.Lock()      # guards the three fields below
        self._threads: List[threading.Thread] = []
        # Threads done with their task, not yet claimed by a submit. A task queued past
        # the cap is taken by the next thread to finish without claiming it, so the count
        # may then exceed the truly idle threads; that only happens at the cap, where no
        # thread is started anyway (a claimed task then waits for the next free thread).
        self._idle = 0
        self._closed = False

    @property
    def threads(self) -> List[threading.Thread]:
        with self._lock:
            return list(self._threads)

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> None:
        """Queue ``fn(arg)``; an idle thread takes it, else a new one (up to the cap;
        past it, the next thread to finish). Raises RuntimeError once shut down."""
        thread = None
        with self._lock:
            if self._closed:
                raise RuntimeError("the handler pool is shut down")
            if self._idle:
                self._idle -= 1
            elif len(self._threads) < self._max:
                thread = threading.Thread(target=self._loop, daemon=True,
                                          name=f"{self._prefix}_{len(self._threads)}")
                self._threads.append(thread)
        self._tasks.put((fn, arg))
        if thread is not None:
            thread.start()

    def shutdown(self) -> None:
        """No new tasks; each thread ends once the tasks before its signal are done."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            count = len(self._threads)
        for _ in range(count):
            self._tasks.put(None)

    def _loop(self) -> None:
        while True:
            task = self._tasks.get()      # ends with the None that shutdown() puts
            if task is None:
                return
            fn, arg = task
            try:
                fn(arg)
            except BaseException:  # noqa: BLE001 - a task's error must not end its thread
                log.exception("handler pool %s: a task raised", self._prefix)
            with self._lock:
                self._idle += 1
