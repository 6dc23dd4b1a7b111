"""The group worker's finisher: one thread writing many completions per script call,
each taking its group's next job for the same slot (complete-and-reserve-next)."""
from __future__ import annotations

import logging
import queue as queue_module
import threading
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ..base.util import now_ms
from ..engine.locks import write_through_blip
from ._manual import completion_fields
from .job import GroupJob

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue

log = logging.getLogger(__name__)

BATCH = 64              # most completions one script call writes

# (job, handler result, its JSON, started at ms)
Done = Tuple[GroupJob, Any, str, int]


class Finisher:
    """Owns one thread; ``put`` hands it a finished job, ``stop`` (after every handler
    thread ended) makes it drain and exit. Each call is retried through a Redis blip
    for up to the queue's job timeout (``write_through_blip``; the worker heartbeats
    the jobs meanwhile). Callbacks run on its thread: ``on_next(job)`` for a chained
    next job (the slot stays taken), ``on_done(job, result, ok)`` for each job (``ok``
    False when it was no longer this worker's, or its write was given up: the worker
    then no longer holds it), ``on_free()`` for each slot freed, ``on_error(exc)`` when
    a call was given up (its jobs are dropped and their slots freed; the stalled check
    recovers those jobs)."""

    def __init__(self, queue: "GroupQueue", new_token: Callable[[], str],
                 chain: Callable[[], bool],
                 on_next: Callable[[GroupJob], None],
                 on_done: Callable[[GroupJob, Any, bool], None], on_free: Callable[[], None],
                 on_error: Callable[[BaseException], None]) -> None:
        self.queue = queue
        self.new_token = new_token          # the token of the next jobs a call takes
        self.chain = chain
        self.on_next = on_next
        self.on_done = on_done
        self.on_free = on_free
        self.on_error = on_error
        self._inbox: "queue_module.SimpleQueue[Optional[Done]]" = queue_module.SimpleQueue()
        self._stop_lock = threading.Lock()    # guards _stopped and the stop marker's place
        self._stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"orijs-group-finisher-{queue.name}")

    def start(self) -> None:
        self._thread.start()

    def put(self, done: Done) -> None:
        """Hand over a finished job; once stopped (``close`` called from inside a
        handler, whose job ends after it), it is written on the calling thread."""
        with self._stop_lock:
            if not self._stopped:
                self._inbox.put(done)
                return
        self._finish([done])

    def stop(self, timeout: Optional[float]) -> bool:
        """Drain and exit; joined, unless called on its own thread (from a listener:
        it drains once that returns)."""
        with self._stop_lock:
            self._stopped = True
            self._inbox.put(None)
        if self.is_current_thread():
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def is_current_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _take_batch(self) -> Tuple[List[Done], bool]:
        first = self._inbox.get()
        if first is None:
            return [], True
        batch = [first]
        while len(batch) < BATCH:
            try:
                item = self._inbox.get_nowait()
            except queue_module.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch, stopping = self._take_batch()
            if not batch:
                continue
            try:
                self._finish(batch)
            except Exception:  # noqa: BLE001 - the thread must survive any error
                log.exception("settling %d finished group jobs failed", len(batch))

    def _given_up(self, batch: List[Done], exc: BaseException) -> None:
        log.warning("finishing %d group jobs failed, given up: %s (the stalled check "
                    "recovers them)", len(batch), exc)
        for job, result, _, _ in batch:
            self.on_done(job, result, False)       # no longer held nor heartbeated
            self.on_free()
        self.on_error(exc)

    def _write(self, batch: List[Done], now: int) -> Tuple[str, List[Any]]:
        """The batch's completions in one call (through a blip); the token of the next
        jobs it took, and its replies."""
        q = self.queue
        token = self.new_token()
        args: List[Any] = [token, now, q.job_timeout_ms, q.keep_completed,
                           "1" if self.chain() else "0"]
        for job, _, text, started in batch:
            args += [job.id, job.group_id, job.token,
                     completion_fields(q, job, text, started, now)]
        return token, write_through_blip(lambda: q.run_hot("complete", *args),
                                         q.job_timeout_ms / 1000.0)

    def _finish(self, batch: List[Done]) -> None:
        now = now_ms()
        try:
            token, replies = self._write(batch, now)
        except Exception as exc:  # noqa: BLE001 - given up: the stalled check recovers them
            self._given_up(batch, exc)
            return
        for reply in replies:      # every slot settled first, then the events
            if isinstance(reply, list):
                self.on_next(GroupJob.from_reply(reply, self.queue, token))
            else:
                self.on_free()
        for (job, result, _, _), reply in zip(batch, replies):
            if reply == 0:
                log.warning("group job %s finished after it stopped being ours (stalled and "
                            "recovered, or removed); its result is dropped", job.id)
                self.on_done(job, result, False)
            else:
                job.status, job.returnvalue, job.finished_on = "completed", result, now
                self.on_done(job, result, True)
