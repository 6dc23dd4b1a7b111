"""Recovering stalled jobs (the worker's stalled check) and GroupMQ's cleanup pass
(``Queue.cleanup``), which shares GroupMQ's lock so one runs at a time across Node
and Python workers."""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Tuple

from ..base.util import now_ms

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue

CLEANUP_LOCK_MS = 60_000     # GroupMQ's cleanup lock (``cleanup:lock``, 60 s)
STALLED_BATCH = 100          # most jobs one stalled script call looks at

Stalled = Tuple[str, str, str]     # job id, group id, "recovered" | "failed"


def recover_stalled(queue: "GroupQueue", grace_ms: int, max_stalled: int,
                    limit: int = STALLED_BATCH) -> List[Stalled]:
    """Recover up to ``limit`` jobs whose deadline is ``grace_ms`` past (back to their
    place in their group; a job found stalled more than ``max_stalled`` times fails)."""
    reply = queue.run_script("stalled", now_ms(), grace_ms, max_stalled, limit)
    return [(str(reply[i]), str(reply[i + 1]), str(reply[i + 2]))
            for i in range(0, len(reply), 3)]


def cleanup(queue: "GroupQueue", max_stalled: int, grace_ms: int = 0) -> List[Stalled]:
    """GroupMQ's cleanup: unless another worker (Node's or ours) ran one in the last
    60 s (its lock is taken here), recover every job whose deadline passed (counted as
    a stall, so ``max_stalled`` still fails a job that keeps stalling), then put back
    in ready every group left out of it (one pass over all groups)."""
    if not queue.client.set(queue.key("cleanup", "lock"), "1", px=CLEANUP_LOCK_MS, nx=True):
        return []
    found: List[Stalled] = []
    while True:
        batch = recover_stalled(queue, grace_ms, max_stalled)
        found += batch
        if len(batch) < STALLED_BATCH:
            break
    queue.recover_delayed_groups()
    return found
