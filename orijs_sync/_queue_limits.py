"""Queue-wide limits: global concurrency and rate limit (BullMQ stores them in the queue's
meta hash, as ``concurrency``, ``max`` and ``duration`` in ms; every worker's take, Node's
and ours, honours them), and the rate limiter key (``{prefix}:{queue}:limiter``)."""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

from .base import validate as check
from .base.util import Seconds, stored_int, to_ms

# What a manual rate limit sets the limiter key to (BullMQ's Number.MAX_SAFE_INTEGER):
# more than any max, so every take waits for the key's expiry.
MANUAL_RATE_LIMIT = 2 ** 53 - 1


def limit_ms(seconds: Seconds, arg: str) -> int:
    """A limit's duration in whole milliseconds, at least 1 (Redis' PX and BullMQ's
    limiter take milliseconds)."""
    ms = to_ms(seconds, arg, allow_none=False)
    if not ms or ms < 1:
        check.bad_value(arg, seconds, "must be at least 0.001 seconds")
    return ms


class LimitsQueueMixin:
    """Mixed into ``orijs_sync.queue.Queue`` (which provides keys, client, scripts)."""

    keys: Any
    client: Any
    scripts: Any

    # -- global concurrency --------------------------------------------------
    def set_global_concurrency(self, concurrency: int) -> None:
        """At most ``concurrency`` jobs of this queue active at once, across every worker
        (Node's too): BullMQ's setGlobalConcurrency. A worker finding the queue at the
        limit takes nothing; one blocked on the queue looks again once a job it finishes
        itself frees a place, or after its ``drain_delay``."""
        check.integer(concurrency, "concurrency", minimum=1)
        self.client.hset(self.keys.meta, "concurrency", concurrency)

    def get_global_concurrency(self) -> Optional[int]:
        """The global concurrency, or None when none is set (BullMQ's getGlobalConcurrency)."""
        return stored_int(self.client.hget(self.keys.meta, "concurrency"))

    def remove_global_concurrency(self) -> bool:
        """Lift the global concurrency; returns whether one was set."""
        return bool(self.client.hdel(self.keys.meta, "concurrency"))

    # -- global rate limit -----------------------------------------------------
    def set_global_rate_limit(self, max: int, duration: Seconds) -> None:  # noqa: A002 - BullMQ's name
        """At most ``max`` jobs of this queue started per ``duration`` seconds, across
        every worker (Node's too): BullMQ's setGlobalRateLimit. It takes precedence over
        a worker's own ``limiter`` max (a worker's ``limiter`` duration still wins)."""
        check.integer(max, "max", minimum=1)
        ms = limit_ms(duration, "duration")
        self.client.hset(self.keys.meta, mapping={"max": max, "duration": ms})

    def get_global_rate_limit(self) -> Optional[Dict[str, Any]]:
        """``{"max": n, "duration": seconds}``, or None unless both are set (BullMQ's
        getGlobalRateLimit)."""
        max_jobs, duration = self.client.hmget(self.keys.meta, "max", "duration")
        max_n, duration_ms = stored_int(max_jobs), stored_int(duration)
        if max_n is None or duration_ms is None:
            return None
        return {"max": max_n, "duration": duration_ms / 1000.0}

    def remove_global_rate_limit(self) -> bool:
        """Lift the global rate limit; returns whether one was set."""
        return bool(self.client.hdel(self.keys.meta, "max", "duration"))

    # -- the limiter key -------------------------------------------------------
    def rate_limit(self, seconds: Seconds) -> None:
        """Hold back the queue for ``seconds`` (BullMQ's queue.rateLimit): the limiter
        key counts past any max until it expires. Workers with a ``limiter`` (and, with
        a global rate limit, every worker) take nothing until then."""
        ms = limit_ms(seconds, "seconds")
        self.client.set(self.keys.limiter, MANUAL_RATE_LIMIT, px=ms)

    def get_rate_limit_ttl(self, max_jobs: Optional[int] = None) -> float:
        """Seconds until the queue's rate limit passes (BullMQ's getRateLimitTtl): 0.0
        when it is not limited, that is when the limiter key has counted fewer than
        ``max_jobs`` jobs (by default the global max; with neither, any live key
        counts). A limiter key without expiry (written by hand) gives ``math.inf``."""
        if max_jobs is not None:
            check.integer(max_jobs, "max_jobs", minimum=1)
        ms = int(self.scripts.run("getRateLimitTtl", [self.keys.limiter, self.keys.meta],
                                  [max_jobs or 0]))
        if ms == -1:
            return math.inf
        return max(ms, 0) / 1000.0

    def remove_rate_limit_key(self) -> bool:
        """Delete the limiter key: a rate limit in force ends now. Returns whether there
        was one."""
        return bool(self.client.delete(self.keys.limiter))
