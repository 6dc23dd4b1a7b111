"""Processing throughput with 3 worker processes: one Redis beside a 3-primary Redis
Cluster (queues spread over the primaries by hash tag). Run by hand:

    python bench/bench_cluster.py [--jobs 20000] [--out bench/CLUSTER.md]

Starts its own servers on free loopback ports (orijs_sync.testing) and stops them.
Each process works one queue (``{q0}``, ``{q1}``, ``{q2}``: on the cluster, one per
primary) with concurrency 16 and a handler that returns at once; the processes are
started ahead and released together; the figure is all jobs / (last completion -
release).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import threading
import time
from typing import Any, Dict, List

from orijs_sync import Queue, Worker
from orijs_sync.testing import ClusterServers, RedisServer

NAMES = ["{q0}", "{q1}", "{q2}"]


def _work(conn: Any, name: str, n: int, go: Any, out: Any) -> None:
    lock, done, count = threading.Lock(), threading.Event(), [0]

    def handle(job: Any) -> None:
        with lock:
            count[0] += 1
            if count[0] >= n:
                done.set()

    with Queue(name, connection=conn) as queue:
        queue.count()                     # connected before the release
        go.wait()
        with Worker(name, handle, connection=conn, concurrency=16, autorun=True):
            done.wait(600)
            out.put(time.time())


def measure(conn: Any, per_queue: int) -> float:
    for name in NAMES:
        with Queue(name, connection=conn) as queue:
            for start in range(0, per_queue, 1000):
                queue.add_bulk([{"name": "x", "data": {"i": i}}
                                for i in range(start, min(start + 1000, per_queue))])
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_work, args=(conn, name, per_queue, go, out)) for name in NAMES]
    for proc in procs:
        proc.start()
    time.sleep(3.0)                       # every process connected and blocked
    released = time.time()
    go.set()
    ends = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(60)
    return per_queue * len(NAMES) / (max(ends) - released)


def main(argv: List[str] = None) -> int:  # type: ignore[assignment]
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20000, help="jobs in all (split over 3)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "CLUSTER.md"))
    args = parser.parse_args(argv)
    per_queue = args.jobs // len(NAMES)
    figures: Dict[str, float] = {}
    with RedisServer() as single:
        figures["one Redis"] = measure(single.url, per_queue)
    with ClusterServers(3) as cluster:
        figures["Redis Cluster, 3 primaries"] = measure(
            {"startup_nodes": cluster.startup_nodes}, per_queue)
    lines = ["# Processing on a Redis Cluster", "",
             f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"`python bench/bench_cluster.py --jobs {args.jobs}`",
             f"- machine: {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
             f"load average (1 min) {os.getloadavg()[0]:.2f} at the end",
             "- 3 worker processes × concurrency 16, one queue each, no-op handler", "",
             "| Redis | processing /s 3 procs |", "|---|---:|"]
    lines += [f"| {where} | {rate:,.0f} |" for where, rate in figures.items()]
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as handle:
        handle.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
