"""How the engine scales with the queues it serves: a lock renewer or stalled checker pass
costs what is due, not a scan of every queue (a thousand queues, each due on its own,
made a hundred full scans a second); idle queues look again spread out, a batch at a
time, and a queue whose jobs come from this process's adds does not look in vain."""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterator, List, Set

import pytest

from orijs_sync import Queue, QueueEvents, Worker, WorkerGroup
from orijs_sync.engine import engine as _engine
from orijs_sync.engine import engine_roles as _engine_roles
from orijs_sync.testing import wait_until

from engine_state import drain_ends, waits_on_marker

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


# -- fetching for many queues ---------------------------------------------------------
@pytest.fixture
def fetches(monkeypatch: pytest.MonkeyPatch) -> Dict[str, List[Any]]:
    """"rounds": the number of queues each pipelined fetch round trip took jobs for;
    "looks": the worker of each fetch (one queue looked at)."""
    seen: Dict[str, List[Any]] = {"rounds": [], "looks": []}
    fetch_many, fetched = _engine_roles.Fetcher._fetch_many, _engine.Engine.fetched

    def counted_round(self: Any, takes: List[Any]) -> None:
        seen["rounds"].append(len(takes))
        fetch_many(self, takes)

    def counted_look(self: Any, w: Any, *args: Any) -> None:
        seen["looks"].append(w)
        fetched(self, w, *args)
    monkeypatch.setattr(_engine_roles.Fetcher, "_fetch_many", counted_round)
    monkeypatch.setattr(_engine.Engine, "fetched", counted_look)
    return seen


def test_many_queues_look_again_a_batch_at_a_time_spread_out(redis_url, namespace,
                                                             fetches):
    """Many idle queues of one engine, found empty together, look again at times
    spread over the last tenth of their drain delay, and one round trip looks at
    FETCH_BATCH queues at most: they used to look again together at the next whole
    second, in one pipelined call (a thousand queues held Redis and the process for
    15-20 ms, and an emit waited on then took as long)."""
    done: Set[str] = set()
    lock = threading.Lock()

    def handler(job: Any) -> None:
        with lock:
            done.add(job.queue.name)
    names = [f"{namespace}-q{i}" for i in range(QUEUES)]
    for name in names:
        with Queue(name, redis_url) as queue:
            queue.add("x", {})
    with WorkerGroup(redis_url) as group:
        workers = [Worker(name, handler, group=group, drain_delay=1).start()
                   for name in names]
        wait_until(lambda: len(done) == QUEUES, 30, "a job of every queue run")
        wait_until(lambda: all(waits_on_marker(w) for w in workers), 30,
                   "every queue found empty")
        ends = drain_ends(workers)
        looked = len(fetches["looks"])
        wait_until(lambda: len(fetches["looks"]) >= looked + QUEUES, 30,
                   "every queue looked again")
        for worker in workers:
            worker.close()
    assert len({round(end, 3) for end in ends}) > QUEUES // 2, sorted(ends)
    assert max(fetches["rounds"]) <= _engine.FETCH_BATCH, fetches["rounds"]


def test_a_queue_fed_by_adds_of_this_process_never_looks_again_in_vain(queue, redis_url,
                                                                     fetches):
    """Each job is handed to the Worker by the add, and the write of its outcome finds
    the queue empty: that look puts off the one the drain delay would bring, so the
    fetcher does not look (in vain) every drain delay while jobs come this way."""
    with QueueEvents(queue.name, redis_url) as events, \
            Worker(queue.name, lambda job: job.data, connection=redis_url,
                   drain_delay=0.5) as worker:
        wait_until(lambda: waits_on_marker(worker), 10, "the first look found it empty")
        before = fetches["looks"].count(worker)
        started = time.monotonic()
        while time.monotonic() - started < 2.5:       # five drain delays
            assert queue.add("x", {"n": 1}).wait_until_finished(events, 10) == {"n": 1}
            time.sleep(0.1)
        assert fetches["looks"].count(worker) == before
