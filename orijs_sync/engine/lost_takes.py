"""The takes of one worker whose reply may have been lost.

A script call that takes jobs (moveToActive, moveToFinished, an add handing its job
over) can run in Redis and lose its reply to a dropped connection. The jobs it took
are then in ``active``, locked with tokens of this worker that nothing renews: left
alone, they wait for their lock to expire and for the stalled checker, and a job that
stalls past ``max_stalled_count`` fails without having run. So a failed call's token
range is kept here, and the worker's next call that takes jobs carries the ranges
(``opts.lost``): the script takes those jobs back first (``takeLost`` in
``lua/includes/activate.lua``), giving each its own new token. Ranges are dropped once a
call had room for all their jobs; a call that fails hands its ranges back.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List

# Ranges kept at most (the oldest dropped: their jobs' locks have long expired, and
# the stalled checker has them).
MAX_RANGES = 64


class LostTakes:
    """Token ranges ``[tokenStart, count]`` of failed takes; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()      # guards _ranges
        self._ranges: List[List[int]] = []

    def include(self, opts: Dict[str, Any], count: int) -> None:
        """Hand the kept ranges to a call about to take up to ``count`` jobs with
        ``opts`` (a worker's own tokens: ``tokenStart``)."""
        if count <= 0 or not self._ranges or "tokenStart" not in opts:
            return      # (an unlocked look first: nearly always empty, on the hot path)
        with self._lock:
            if not self._ranges:
                return
            opts["lost"] = list(self._ranges)
            if count >= sum(n for _, n in self._ranges):
                self._ranges = []      # room for them all; else kept for the next call

    def failed(self, opts: Dict[str, Any], count: int) -> None:
        """A call made with ``opts``, taking up to ``count`` jobs, failed: it may have
        run, and the ranges it carried are not taken back yet."""
        if "tokenStart" not in opts:
            return
        ranges = list(opts.get("lost", ()))
        if count > 0:
            ranges.append([opts["tokenStart"], count])
        if ranges:
            with self._lock:
                kept = self._ranges + [r for r in ranges if r not in self._ranges]
                self._ranges = kept[-MAX_RANGES:]
