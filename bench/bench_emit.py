#!/usr/bin/env python
"""Round trip of ``BullMQEventProvider.emit(name, payload).result()``: p50 / p99.

    python bench/bench_emit.py                 # $REDIS_URL, else a redis-server it starts
    python bench/bench_emit.py --count 5000 --url redis://127.0.0.1:6379/0
    python bench/bench_emit.py --in-process    # the same loop on InProcessEventProvider

One process plays both sides: a subscriber (worker threads) that returns the
payload, and a caller that emits sequentially, each emit waited for before the
next (add the job -> a worker takes it -> the handler runs -> the completed
entry in the events stream -> the events thread settles the Future). Warm-up
emits are not counted. Prints the figures; asserts nothing. Run by hand.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from typing import List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from orijs_sync.events import BullMQEventProvider, InProcessEventProvider  # noqa: E402
from orijs_sync.testing import delete_keys, local_redis  # noqa: E402


def percentile(sorted_values: List[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, int(round(q / 100.0 * len(sorted_values))) - 1))
    return sorted_values[index]


def run(provider, count: int, warmup: int) -> None:
    provider.subscribe("bench.echo", lambda message: message.payload)
    started = time.perf_counter()
    provider.emit("bench.echo", {"n": -1}).result(timeout=30)
    first = time.perf_counter() - started
    for n in range(warmup):
        provider.emit("bench.echo", {"n": n}).result(timeout=30)
    samples = []
    begin = time.perf_counter()
    for n in range(count):
        t0 = time.perf_counter()
        result = provider.emit("bench.echo", {"n": n}).result(timeout=30)
        samples.append(time.perf_counter() - t0)
        if result != {"n": n}:
            raise RuntimeError(f"wrong result {result!r} for emit {n}")
    total = time.perf_counter() - begin
    samples.sort()
    ms = 1000.0
    print(f"provider         {type(provider).__name__}")
    print(f"emits            {count} sequential (+{warmup} warm-up)")
    print(f"first emit       {first * ms:8.3f} ms  (new event type: queue + events stream set up)")
    print(f"p50              {percentile(samples, 50) * ms:8.3f} ms")
    print(f"p90              {percentile(samples, 90) * ms:8.3f} ms")
    print(f"p99              {percentile(samples, 99) * ms:8.3f} ms")
    print(f"mean             {statistics.fmean(samples) * ms:8.3f} ms")
    print(f"max              {samples[-1] * ms:8.3f} ms")
    print(f"throughput       {count / total:8.1f} emits/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--url", default=None, help="Redis URL (default: $REDIS_URL or a "
                                                     "redis-server started for the run)")
    parser.add_argument("--in-process", action="store_true",
                        help="measure InProcessEventProvider (no Redis) instead")
    args = parser.parse_args()
    if args.in_process:
        with InProcessEventProvider() as provider:
            run(provider, args.count, args.warmup)
        return 0
    prefix = f"bench-emit-{uuid.uuid4().hex[:8]}"
    with local_redis(args.url) as url:
        try:
            with BullMQEventProvider(url, queue_prefix=prefix,
                                     default_job_options={"remove_on_complete": True}) as provider:
                print(f"redis            {url}")
                run(provider, args.count, args.warmup)
        finally:
            delete_keys(url, f"bull:{prefix}.*")
    return 0


if __name__ == "__main__":
    sys.exit(main())
