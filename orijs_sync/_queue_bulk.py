"""Bulk moves of Queue: every failed (or completed) job back to wait, every delayed job
to wait now, in batches (BullMQ's retryJobs and promoteJobs)."""
from __future__ import annotations

from typing import Any, Optional, Union

from .base import validate as check
from .base.util import now_ms

RETRY_STATES = ("failed", "completed")


class BulkQueueMixin:
    """Mixed into ``orijs_sync.queue.Queue`` (which provides keys and scripts)."""

    keys: Any
    scripts: Any

    def retry_jobs(self, state: str = "failed", count: int = 1000,
                   timestamp: Optional[float] = None) -> int:
        """Move every ``state`` job (``"failed"`` or ``"completed"``) that finished at or
        before ``timestamp`` (seconds since the epoch, as ``time.time()``; default now)
        back to wait, ``count`` per atomic batch (BullMQ's retryJobs). Each moves as
        ``job.retry()`` moves it: result cleared, attempts kept, its priority and lifo
        honoured, its parent waiting for it again. Returns how many jobs moved."""
        check.one_of(state, RETRY_STATES, "state", "job state")
        check.integer(count, "count", minimum=1)
        if timestamp is None:
            cutoff = now_ms()
        else:
            cutoff = int(check.number(timestamp, "timestamp", minimum=0,
                                      maximum=check.MAX_INT / 1000) * 1000)
        return self._move_all_to_wait(state, count, cutoff)

    def promote_jobs(self, count: int = 1000) -> int:
        """Move every delayed job to wait now, ``count`` per atomic batch (BullMQ's
        promoteJobs), each as ``job.promote()`` moves it (a job with a priority to the
        prioritized set). Returns how many jobs moved."""
        check.integer(count, "count", minimum=1)
        return self._move_all_to_wait("delayed", count, "+inf")

    def _move_all_to_wait(self, state: str, count: int, highest: Union[int, str]) -> int:
        """moveJobsToWait batches until one reads fewer than ``count`` ids."""
        moved = 0
        while True:
            read, batch = self.scripts.run("moveJobsToWait", [self.keys.key(state)],
                                           [self.keys.base, state, count, highest])
            moved += int(batch)
            if int(read) < count:
                return moved
