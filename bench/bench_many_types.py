#!/usr/bin/env python
"""Many event types in one process: threads, Redis connections, RSS and the
``emit(...).result()`` round trip with 1 / 10 / 100 / 1,000 subscribed event types
(each its own queue), beside BullMQ for Node with as many Workers in one process.

    python bench/bench_many_types.py                      # 1,10,100,1000; a redis-server it starts
    python bench/bench_many_types.py --types 1,1000 --count 1000 --url redis://...
    python bench/bench_many_types.py --no-node            # orijs_sync only

Each figure comes from a fresh child process (``--child N``) that subscribes N types,
then emits ``count`` times sequentially, round-robin over the types (each emit
waited for before the next), after ``warmup`` uncounted emits. Connections are the
Redis clients other than the measuring one (``CLIENT LIST``), counted while the
child runs. ``xread_ms`` is one non-blocking XREAD over every events stream the
provider watches (the events side's cost per call). Prints a table; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import redis  # noqa: E402

from orijs_sync.events import BullMQEventProvider  # noqa: E402
from orijs_sync.testing import delete_keys, local_redis  # noqa: E402

NODE_SCRIPT = os.path.join(HERE, "node", "many_types.js")


def percentile(values: List[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q / 100.0 * len(values))) - 1))]


def other_clients(url: str) -> int:
    probe = redis.Redis.from_url(url)
    try:
        probe.client_setname("bench-probe")
        return sum(1 for c in probe.client_list() if c.get("name") != "bench-probe")
    finally:
        probe.close()


def xread_cost(url: str, prefix: str, types: int) -> float:
    client = redis.Redis.from_url(url)
    streams = {f"bull:{prefix}.t{i}:events": "$" for i in range(types)}
    ids = {k: "$" for k in streams}
    started = time.perf_counter()
    for _ in range(20):
        client.xread(ids, count=1)
    client.close()
    return (time.perf_counter() - started) / 20 * 1000.0


def child(url: str, types: int, count: int, warmup: int) -> Dict[str, Any]:
    prefix = f"many-{uuid.uuid4().hex[:8]}"
    names = [f"t{i}" for i in range(types)]
    try:
        with BullMQEventProvider(url, queue_prefix=prefix,
                                 default_job_options={"remove_on_complete": True}) as provider:
            started = time.perf_counter()
            for name in names:
                provider.subscribe(name, lambda message: message.payload)
            subscribe_s = time.perf_counter() - started
            for n in range(max(warmup, types)):   # every type emitted once first
                provider.emit(names[n % types], {"n": n}).result(timeout=30)
            samples = []
            for n in range(count):
                t0 = time.perf_counter()
                provider.emit(names[n % types], {"n": n}).result(timeout=30)
                samples.append((time.perf_counter() - t0) * 1000.0)
            threads = threading.active_count()
            connections = other_clients(url)
            xread_ms = xread_cost(url, prefix, types)
    finally:
        delete_keys(url, f"bull:{prefix}.*")
    return {"peer": "orijs_sync", "types": types, "threads": threads,
            "connections": connections,
            "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "p50_ms": round(percentile(samples, 50), 3), "p99_ms": round(percentile(samples, 99), 3),
            "subscribe_s": round(subscribe_s, 2), "xread_ms": round(xread_ms, 3)}


def run_child(cmd: List[str], timeout: float) -> Dict[str, Any]:
    env = dict(os.environ)    # Node's bullmq: bench/node's own install, else tests/interop's
    env["NODE_PATH"] = os.pathsep.join(
        p for p in (os.path.join(HERE, "node", "node_modules"),
                    os.path.join(os.path.dirname(HERE), "tests", "interop", "node_modules"),
                    env.get("NODE_PATH", "")) if p)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{cmd[:3]} failed:\n{out.stdout}\n{out.stderr}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default="1,10,100,1000")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--url", default=None)
    parser.add_argument("--no-node", action="store_true")
    parser.add_argument("--child", type=int, default=0)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.url, args.child, args.count, args.warmup)))
        return 0
    rows = []
    with local_redis(args.url) as url:
        for types in [int(t) for t in args.types.split(",")]:
            common = ["--count", str(args.count), "--warmup", str(args.warmup), "--url", url]
            rows.append(run_child([sys.executable, __file__, "--child", str(types), *common],
                                  900))
            print(json.dumps(rows[-1]), flush=True)
            if not args.no_node:
                rows.append(run_child(["node", NODE_SCRIPT, "--types", str(types), *common], 900))
                print(json.dumps(rows[-1]), flush=True)
    print("\n| peer | types | threads | Redis connections | RSS MB | p50 ms | p99 ms | XREAD ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['peer']} | {r['types']} | {r.get('threads', '-')} | {r['connections']} | "
              f"{r['rss_mb']} | {r['p50_ms']} | {r['p99_ms']} | {r.get('xread_ms', '-')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
