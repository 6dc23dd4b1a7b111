#!/usr/bin/env python
"""A 3-step workflow beside a plain request-response, here and in BullMQ for Node: the
latency, and the CPU each costs in this process and in Redis.

    python bench/bench_flow_chain.py            # 1,000 of each, after a warm-up
    python bench/bench_flow_chain.py --n 3000

orijs_sync: ``queue.add(...).wait_until_finished(events)`` and a 3-step
``BullMQWorkflowProvider.execute(...).result()``, on a redis-server of its own.
BullMQ for Node (``bench/node/flow_chain.js``, on another one): ``queue.add`` +
``waitUntilFinished`` and the same chain as one flow, each step reading its child's
value. For each: p50, p99 (ms), Redis CPU per call (``INFO cpu``), script time per
call (commandstats of EVALSHA) and, here, this process's CPU per call. Both chains are
serial, so the latency is about the two CPUs added. Prints the figures; asserts
nothing. Run by hand.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import redis  # noqa: E402

from orijs_sync import Queue, QueueEvents, Worker  # noqa: E402
from orijs_sync.testing import RedisServer  # noqa: E402
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow  # noqa: E402

NODE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node", "flow_chain.js")


def redis_time(client: redis.Redis) -> Dict[str, float]:
    cpu = client.info("cpu")
    evalsha = client.info("commandstats").get("cmdstat_evalsha", {"usec": 0})
    return {"cpu": cpu["used_cpu_user"] + cpu["used_cpu_sys"], "evalsha": evalsha["usec"]}


def timed(client: redis.Redis, n: int, one: Callable[[int], Any]) -> Dict[str, float]:
    lat: List[float] = []
    before, cpu0 = redis_time(client), time.process_time()
    for i in range(n):
        start = time.perf_counter()
        one(i)
        lat.append((time.perf_counter() - start) * 1000)
    cpu1, after = time.process_time(), redis_time(client)
    lat.sort()
    return {"p50_ms": statistics.median(lat), "p99_ms": lat[int(n * 0.99)],
            "python_cpu_ms": (cpu1 - cpu0) * 1000 / n,
            "redis_cpu_ms": (after["cpu"] - before["cpu"]) * 1000 / n,
            "evalsha_us": (after["evalsha"] - before["evalsha"]) / n}


def ours(n: int, warmup: int) -> Dict[str, Dict[str, float]]:
    wf = (Workflow("Chain").step("a", lambda ctx: {"a": ctx.data["n"]})
          .step("b", lambda ctx: {"b": ctx.get_result("a")["a"] + 1})
          .step("c", lambda ctx: {"c": ctx.get_result("b")["b"] + 1}))
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        queue = Queue("plain", connection=server.url)
        provider = BullMQWorkflowProvider(server.url, queue_prefix="bench.workflow",
                                          concurrency=16)
        provider.register(wf)
        with QueueEvents("plain", connection=server.url) as events, \
                Worker("plain", lambda job: {"ok": job.data["n"]}, connection=server.url,
                       concurrency=16), provider:
            def rr(i: int) -> Any:
                return queue.add("job", {"n": i}).wait_until_finished(events, 10)

            def chain(i: int) -> Any:
                return provider.execute(wf, {"n": i}).result(timeout=10)
            for i in range(warmup):
                rr(i)
                chain(i)
            result = {"rr": timed(client, n, rr), "chain": timed(client, n, chain)}
        queue.close()
        return result


def node(n: int, warmup: int) -> Dict[str, Dict[str, float]]:
    with RedisServer() as server:
        out = subprocess.run(["node", NODE, "--url", server.url, "--n", str(n),
                              "--warmup", str(warmup)], capture_output=True, text=True,
                             timeout=600, cwd=os.path.dirname(NODE), check=True).stdout
    line = next(row for row in out.splitlines() if row.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()
    rows = {"orijs_sync": ours(args.n, args.warmup), "BullMQ for Node": node(args.n, args.warmup)}
    print(f"{'peer':<16} {'case':<6} {'p50 ms':>7} {'p99 ms':>7} {'py cpu ms':>9} "
          f"{'redis cpu ms':>12} {'evalsha µs':>10}")
    for peer, cases in rows.items():
        for case, f in cases.items():
            print(f"{peer:<16} {case:<6} {f['p50_ms']:7.2f} {f['p99_ms']:7.2f} "
                  f"{f.get('python_cpu_ms', float('nan')):9.2f} {f['redis_cpu_ms']:12.2f} "
                  f"{f['evalsha_us']:10.0f}")
        print(f"{peer:<16} chain / rr p50: {cases['chain']['p50_ms'] / cases['rr']['p50_ms']:.2f} ×")


if __name__ == "__main__":
    main()
