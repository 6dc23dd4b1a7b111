"""How the engine's periodic roles scale with the queues they serve: a lock renewer or
stalled checker pass costs what is due, not a scan of every queue (a thousand queues,
each due on its own, made a hundred full scans a second)."""
from __future__ import annotations

import threading
from typing import Any, Dict, Iterator, List

import pytest

from orijs_sync import Worker, WorkerGroup
from orijs_sync.engine import engine as _engine
from orijs_sync.engine import engine_roles as _engine_roles
from orijs_sync.testing import wait_until

QUEUES = 150


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Dict[str, int]]:
    """Passes of the periodic roles, and the full worker lists they were handed."""
    seen = {"passes": 0, "lists": 0}
    lock = threading.Lock()
    loop, workers = _engine_roles.PerQueue.loop, _engine.Engine.workers
    membership = getattr(_engine.Engine, "membership", None)

    def periodic() -> bool:
        name = threading.current_thread().name
        return "lock-renewer" in name or "stalled-checker" in name

    def counted_loop(self: Any) -> None:
        with lock:
            seen["passes"] += 1
        loop(self)

    def counted_workers(self: Any) -> List[Any]:
        listed = workers(self)
        if periodic():
            with lock:
                seen["lists"] += 1
        return listed

    monkeypatch.setattr(_engine_roles.PerQueue, "loop", counted_loop)
    monkeypatch.setattr(_engine.Engine, "workers", counted_workers)
    if membership is not None:
        def counted_membership(self: Any, seen_count: int) -> Any:
            members, listed = membership(self, seen_count)
            if listed and periodic():
                with lock:
                    seen["lists"] += 1
            return members, listed
        monkeypatch.setattr(_engine.Engine, "membership", counted_membership)
    yield seen


def test_periodic_roles_do_not_scan_every_queue_each_pass(redis_url, namespace, counted):
    workers: List[Worker] = []
    with WorkerGroup(redis_url) as group:
        for i in range(QUEUES):   # short locks: each queue's renewal is due on its own
            workers.append(Worker(f"{namespace}-q{i}", lambda job: None, group=group,
                                  lock_duration=1.0, stalled_interval=1.0).start())
        lists_after_start = counted["lists"]
        passes_after_start = counted["passes"]
        wait_until(lambda: counted["passes"] >= passes_after_start + 100, timeout=30,
                   what="100 passes of the periodic roles")
        scans = counted["lists"] - lists_after_start
        for worker in workers:
            worker.close()
    assert scans <= 4, f"{scans} full scans of {QUEUES} queues in 100 passes"
