"""``Worker.rate_limit()`` and a rate-limited job's way back to wait.

A worker created with a ``limiter`` (or serving a queue with a global rate limit) always
waits out the limiter key. One without waits it out, as Node's worker does, from its
``rate_limit()`` call, or from a handler's ``RateLimitError`` while a limit holds, until
the limit passes: its takes then honour a manual limit on the key (``limited`` in
moveToActive's options), so the job put back is taken again only once it passes.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from .base import validate as check
from .base.util import Seconds

if TYPE_CHECKING:  # pragma: no cover
    from .engine.processing import JobRunner
    from .job import Job
    from .keys import QueueKeys
    from .queue import Queue

log = logging.getLogger("orijs_sync.worker")

# How long past the limit's end a worker still honours a manual limit on the key (its
# own clock against Redis': the key gone, honouring it changes nothing).
HOLD_MARGIN = 1.0


class RateLimitMixin:
    """What rate limiting needs of a Worker (its attributes, set by ``Worker.__init__``)."""

    queue: "Queue"
    keys: "QueueKeys"
    _runner: "JobRunner"
    # time.monotonic() until which this worker's takes honour a manual rate limit
    _held_until = 0.0

    def rate_limit(self, seconds: Seconds) -> None:
        """From a handler: hold back the whole queue for ``seconds`` (BullMQ's
        worker.rateLimit, as ``Queue.rate_limit``). Then ``raise errors.RateLimitError()``:
        the job goes back to wait, its attempt not counted, and is taken again once the
        limit has passed. Workers with a ``limiter`` (Node's too) wait it out; this worker
        waits it out with or without one."""
        held = check.seconds(seconds, "seconds", allow_none=False)
        if round(held * 1000) >= 1:
            self.queue.rate_limit(held)
            self._hold_back(held)

    def _hold_back(self, seconds: float) -> None:
        self._held_until = max(self._held_until, time.monotonic() + seconds + HOLD_MARGIN)

    def _held_back(self) -> bool:
        """Its takes honour a manual rate limit on the limiter key now."""
        return time.monotonic() < self._held_until

    def _move_back_to_wait(self, job: "Job") -> None:
        """A job whose handler raised ``RateLimitError``: back to the head of the line,
        no attempt counted; while a limit holds, this worker waits it out."""
        k = self.keys
        code: Any = self._runner.run_script("moveJobFromActiveToWait",
                                            [job.key, k.active, k.stalled, k.limiter],
                                            [k.base, job.id, job.token])
        if isinstance(code, int) and code < 0:
            log.warning("job %s could not go back to wait after a rate limit (code %s)",
                        job.id, code)
        elif code:
            self._hold_back(int(code) / 1000.0)
