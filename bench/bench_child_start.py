#!/usr/bin/env python
"""Process mode's fixed costs, on a Redis this script starts: how long the first child
takes to be ready (the fork server starting too), how long a replacement child takes
(a fork of the fork server plus the handler's import), the round trip of a no-op job
through a child (send, run, reply; no Redis), and each child's resident memory.

    python bench/bench_child_start.py [--rounds 20]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from orijs_sync._processes import QueueJobs  # noqa: E402
from orijs_sync.engine.children import ChildPool  # noqa: E402
from orijs_sync.store.connection import RedisConnection  # noqa: E402
from orijs_sync.testing import RedisServer  # noqa: E402


class Shell:
    """What the pool needs of a job for a no-op round trip."""

    def __init__(self, queue: str, n: int) -> None:
        self.id, self.token, self._fetched_children, self._moved = str(n), None, None, False
        self._fields = {"name": "noop", "data": "{}", "opts": "{}", "timestamp": "0"}
        self.queue = type("Q", (), {"name": queue})()
        self.progress = 0


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def ready_time(pool: ChildPool) -> float:
    t0 = time.perf_counter()
    pool.start()
    pool.run(Shell("bench", 0))          # waits for the child to be ready, then one job
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with RedisServer() as server:
        connection = RedisConnection(server.url)
        first = ChildPool("bench.peers.common:noop", QueueJobs("bull"), connection, size=1,
                          job_timeout=None, max_jobs=None, label="first")
        first_s = ready_time(first)
        trips = []
        for n in range(2000):
            t0 = time.perf_counter()
            first.run(Shell("bench", n))
            trips.append(time.perf_counter() - t0)
        memory = [rss_mb(pid) for pid in first.pids]
        first.close()
        again = []
        for _ in range(args.rounds):
            pool = ChildPool("bench.peers.common:noop", QueueJobs("bull"), connection, size=1,
                             job_timeout=None, max_jobs=None, label="again")
            again.append(ready_time(pool))
            pool.close()
        connection.close()
    print(f"first child ready (fork server start included): {first_s * 1000:.0f} ms")
    print(f"a further child ready (median of {args.rounds}): "
          f"{statistics.median(again) * 1000:.1f} ms")
    trips.sort()
    print(f"no-op round trip through a child: p50 {trips[len(trips) // 2] * 1e6:.0f} us, "
          f"p99 {trips[int(len(trips) * 0.99)] * 1e6:.0f} us")
    print(f"child resident memory: {', '.join(f'{m:.1f} MB' for m in memory)}")


if __name__ == "__main__":
    main()
