#!/usr/bin/env python
"""Where a request-response's CPU goes, thread by thread.

    python bench/bench_threads.py                     # 5,000 rounds, a redis-server it starts
    python bench/bench_threads.py --count 10000 --url redis://127.0.0.1:6379/0
    python bench/bench_threads.py --emit              # the emit case instead

Runs the ``rr`` case of ``bench/run.py`` (``queue.add(...)`` then
``job.wait_until_finished(events)``, the worker in this process, concurrency 16) and
reads each thread's own CPU clock (``pthread_getcpuclockid``) before and after. It
prints the wall time per round, the process's CPU per round, and each thread's share.
With one GIL, a process whose CPU per round is near its wall time per round is bound
by its own CPU: every µs any thread spends on the path (the events thread reading an
"added" or "active" entry nobody waits for included) delays the round. Asserts
nothing; run by hand.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from contextlib import ExitStack
from typing import Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from orijs_sync import Queue, QueueEvents, Worker  # noqa: E402
from orijs_sync.events import BullMQEventProvider  # noqa: E402
from orijs_sync.testing import local_redis  # noqa: E402


def thread_cpu() -> Dict[str, float]:
    """Each live thread's CPU seconds, by name."""
    seconds: Dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            clock = time.pthread_getcpuclockid(thread.ident)
            seconds[thread.name] = time.clock_gettime(clock)
        except (OSError, ProcessLookupError):
            continue          # ended meanwhile
    return seconds


def rounds(url: str, count: int, emit: bool) -> None:
    latencies = []
    with ExitStack() as stack:
        if emit:
            provider = BullMQEventProvider(url).start()
            stack.callback(provider.stop, timeout=30)
            provider.subscribe("threads", lambda message: None)
            one = lambda i: provider.emit("threads", {"i": i}).result(timeout=10)  # noqa: E731
        else:
            queue = stack.enter_context(Queue("threads", connection=url))
            events = stack.enter_context(QueueEvents("threads", connection=url))
            stack.enter_context(Worker("threads", lambda job: None, connection=url,
                                       concurrency=16))
            one = lambda i: queue.add("job", {"i": i}, remove_on_complete=True  # noqa: E731
                                      ).wait_until_finished(events, 10)
        for i in range(count // 10):                       # warm up
            one(i)
        before, started = thread_cpu(), time.perf_counter()
        for i in range(count):
            t = time.perf_counter()
            one(i)
            latencies.append(time.perf_counter() - t)
        wall = time.perf_counter() - started
        after = thread_cpu()
    latencies.sort()
    spent = {name: after[name] - before.get(name, 0.0) for name in after}
    total = sum(spent.values())
    print(f"{count} rounds: wall {1e6 * wall / count:.0f} µs a round "
          f"(p50 {1e6 * latencies[count // 2]:.0f} µs), "
          f"process CPU {1e6 * total / count:.0f} µs a round "
          f"({100 * total / wall:.0f} % of one core)")
    for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        if seconds * 1e6 / count >= 1:
            print(f"  {name:32s} {1e6 * seconds / count:6.0f} µs a round")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--emit", action="store_true", help="the emit case: "
                        "BullMQEventProvider.emit(...).result(), subscriber in this process")
    parser.add_argument("--url", default=None, help="Redis URL (default: $REDIS_URL or a "
                        "redis-server started here)")
    args = parser.parse_args()
    with local_redis(args.url or os.environ.get("REDIS_URL")) as url:
        rounds(url, args.count, args.emit)


if __name__ == "__main__":
    main()
