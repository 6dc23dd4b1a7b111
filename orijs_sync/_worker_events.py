"""A Worker's local listeners (``worker.on(event, fn)``), with BullMQ's worker events
and meanings; listeners run on the thread that emits (a handler thread, the engine's
threads, the caller of ``pause()``/``close()``...), and one that raises is logged,
never breaking the worker.

- ``active(job)``: a job was taken, before its handler runs;
- ``progress(job, progress)``: a job of this worker updated its progress;
- ``completed(job, result)``: its outcome was written, completed;
- ``failed(job, exc)``: an attempt failed (retried, or failed for good);
- ``drained()``: a look for jobs found the queue empty (once per emptying);
- ``stalled(job_id)``: the stalled check moved a job back to wait;
- ``lock_renewal_failed(job_ids)``: locks this worker renews were gone;
- ``error(exc)``: an error the worker survived;
- ``ready()``: ``start()`` is done (a manual worker: its first look reached Redis);
- ``paused()`` / ``resumed()``: ``pause()`` stopped taking jobs (once the active ones
  ended, when it waits) / ``resume()`` of a paused worker;
- ``closing(message)`` / ``closed()``: ``close()`` began / is done.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, List

from .base import validate as check

log = logging.getLogger("orijs_sync.worker")

LISTENER_EVENTS = ("active", "progress", "completed", "failed", "drained", "stalled",
                   "lock_renewal_failed", "error", "ready", "paused", "resumed", "closing",
                   "closed")


class EventsMixin:
    """What a Worker needs for listeners (its attributes, set by ``Worker.__init__``)."""

    name: str
    process_options: Any
    _listeners: Dict[str, List[Callable[..., Any]]]
    _cv: threading.Condition

    def on(self, event: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Call ``fn`` on each ``event``: active(job), progress(job, progress),
        completed(job, result), failed(job, exc), drained(), stalled(job_id),
        lock_renewal_failed(job_ids), error(exc), ready(), paused(), resumed(),
        closing(message), closed(). BullMQ's worker events, with BullMQ's meanings
        (``lockRenewalFailed`` spelled ``lock_renewal_failed``). Returns ``fn``.

        In process mode a handler's progress is written from its child process, where
        this worker's listeners are not: ``progress`` is refused there."""
        check.one_of(event, LISTENER_EVENTS, "event", "worker event")
        check.function(fn, "fn")
        if event == "progress" and self.process_options is not None:
            check.bad_value("event", event, "is not emitted in process mode (processes=N): "
                            "handlers update progress from their child processes; listen "
                            "to QueueEvents' 'progress' instead")
        with self._cv:
            self._listeners[event] = self._listeners[event] + [fn]
        return fn

    def _emit(self, event: str, *args: Any) -> None:
        for fn in self._listeners[event]:
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - a listener must not break the worker
                log.exception("worker %s listener for %r failed", self.name, event)
