"""GroupMQ's ``autoBatch`` for ``GroupQueue.add``: adds made at about the same time
(by several threads) go to Redis together, up to ``size`` jobs per script call.

No thread of its own: the first add of a batch leads it. It waits up to ``max_wait``
seconds for the batch to fill (``size`` adds end the wait at once), closes it, writes
it in one ``enqueue_batch`` call and hands each add its reply. Every add returns only
once its job is in Redis (or raises its batch's error), so nothing is held in memory
when no add is running: unlike GroupMQ's, whose ``add`` resolves from a buffer a crash
loses, nothing is lost. A lone add waits ``max_wait`` before it is written.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

from . import _options as opt

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue

DEFAULT_SIZE = 10          # GroupMQ's autoBatch defaults: 10 jobs,
DEFAULT_MAX_WAIT = 0.010   # 10 ms
KEYS = ("size", "max_wait")


def settings(value: Any) -> Optional[Tuple[int, float]]:
    """``False``/``None`` (off), ``True`` (GroupMQ's defaults) or ``{"size": n,
    "max_wait": seconds}`` (either key may be left out) -> (size, max_wait) or None."""
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT_SIZE, DEFAULT_MAX_WAIT
    if not isinstance(value, dict):
        raise opt.GroupOptionError(f"auto_batch must be True, False or a dict with keys "
                                   f"{KEYS}, not {value!r}")
    unknown = [key for key in value if key not in KEYS]
    if unknown:
        raise opt.GroupOptionError(f"auto_batch: unknown key(s) {unknown}; the keys are "
                                   f"{KEYS} (max_wait in seconds)")
    size = opt.positive_int(value.get("size", DEFAULT_SIZE), "auto_batch size")
    wait = opt.seconds(value.get("max_wait", DEFAULT_MAX_WAIT), "auto_batch max_wait")
    if wait is None or wait < 0:
        raise opt.GroupOptionError(f"auto_batch max_wait must be >= 0 seconds, not "
                                   f"{value.get('max_wait')!r}")
    return size, wait


class _Batch:
    """One batch of adds: its jobs, then the replies (or the error) of its write."""

    def __init__(self) -> None:
        self.jobs: List[Sequence[Any]] = []
        self.done = threading.Event()
        self.replies: List[Any] = []
        self.error: Optional[BaseException] = None


class AddBatcher:
    """Coalesces one queue's adds; thread-safe."""

    def __init__(self, queue: "GroupQueue", size: int, max_wait: float) -> None:
        self.queue = queue
        self.size = size
        self.max_wait = max_wait
        self._cv = threading.Condition()
        self._open: Optional[_Batch] = None

    def add(self, job: Sequence[Any]) -> Any:
        """Write one job (enqueue_batch's seven values: group id, data, maxAttempts,
        orderMs, delayUntil, job id, timestamp) with whatever adds join it; its reply."""
        with self._cv:
            batch, lead = self._open, False
            if batch is None:
                batch = self._open = _Batch()
                lead = True
            index = len(batch.jobs)
            batch.jobs.append(job)
            if len(batch.jobs) >= self.size:
                self._open = None            # full: the next add starts another
                self._cv.notify_all()
            if lead:
                self._cv.wait_for(lambda: self._open is not batch, self.max_wait)
                if self._open is batch:
                    self._open = None
        if lead:
            self._write(batch)
        else:
            batch.done.wait()
        if batch.error is not None:
            raise batch.error
        return batch.replies[index]

    def _write(self, batch: _Batch) -> None:
        """Write a closed batch in one call; its adds then read their replies."""
        q = self.queue
        args: List[Any] = [q.keep_completed, q.staging_ms]
        for job in batch.jobs:
            args += list(job)
        try:
            batch.replies = list(q.run_script("enqueue_batch", *args))
        except BaseException as exc:  # noqa: BLE001 - every add of the batch gets it
            batch.error = exc
        finally:
            batch.done.set()
