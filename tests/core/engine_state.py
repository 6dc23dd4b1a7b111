"""What a Worker's engine is doing, read from its own state, for tests that check a
fetch did not happen without waiting for a window in which it might have."""
from __future__ import annotations

from typing import List

from orijs_sync import Worker


def waits_on_marker(worker: Worker) -> bool:
    """The engine waits for the worker's queue marker: its last look found the queue
    empty. From there only a marker, a wake or the drain delay's end sends the fetcher
    to look again; a look it was sent to before (an extra look, a stale marker) came
    first. With a long drain delay, the fetches counted by then are all there are."""
    engine = worker._engine
    assert engine is not None
    with engine._cv:
        return id(worker) in engine._drain and id(worker) not in engine._ready


def drain_ends(workers: List[Worker]) -> List[float]:
    """When each waiting worker's drain delay ends (monotonic seconds): its next look."""
    ends = []
    for worker in workers:
        engine = worker._engine
        assert engine is not None
        with engine._cv:
            ends.append(engine._drain[id(worker)])
    return ends
