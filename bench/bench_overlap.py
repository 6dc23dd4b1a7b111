#!/usr/bin/env python
"""How busy the worker process and Redis each are while one Worker drains a backlog.

    python bench/bench_overlap.py                     # 40,000 no-op jobs, concurrency 16
    python bench/bench_overlap.py --count 20000 --concurrency 128 --runs 3

Fills a paused queue (untimed), starts one Worker, waits until it is idle, resumes,
and times to the last completion. Prints jobs/s, the process's CPU time over wall
time (all its threads: the GIL's share) and Redis's (``INFO cpu``) over wall time:
when the two add up to about one core, they take turns instead of overlapping.
Starts its own redis-server unless ``--url``. Asserts nothing; run by hand.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import redis  # noqa: E402

from orijs_sync import Queue, Worker  # noqa: E402
from orijs_sync.testing import delete_keys, local_redis  # noqa: E402


def redis_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def one_run(url: str, count: int, concurrency: int, name: str) -> str:
    r = redis.Redis.from_url(url)
    queue = Queue(name, connection=url)
    queue.pause()
    jobs = [{"name": "job", "data": {"i": i}, "opts": {"remove_on_complete": True}}
            for i in range(count)]
    for start in range(0, count, 500):
        queue.add_bulk(jobs[start:start + 500])
    done, seen, lock = threading.Event(), [0], threading.Lock()

    def completed(job: object, result: object) -> None:
        with lock:
            seen[0] += 1
            if seen[0] == count:
                done.set()
    worker = Worker(name, lambda job: None, connection=url, concurrency=concurrency)
    worker.on("completed", completed)
    worker.start()
    try:
        time.sleep(1.0)                      # ready and blocked on the paused queue
        redis0, cpu0, t0 = redis_cpu(r), time.process_time(), time.perf_counter()
        queue.resume()
        if not done.wait(600):
            raise TimeoutError(f"{seen[0]} of {count} jobs completed")
        wall = time.perf_counter() - t0
        cpu, rcpu = time.process_time() - cpu0, redis_cpu(r) - redis0
    finally:
        worker.close()
        queue.close()
        r.close()
    return (f"{count / wall:9,.0f} jobs/s   worker {cpu / count * 1e6:5.0f} µs/job "
            f"({cpu / wall:.2f} cores)   Redis {rcpu / count * 1e6:5.0f} µs/job "
            f"({rcpu / wall:.2f} cores)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    with local_redis(args.url) as url:
        for run in range(args.runs):
            name = f"bench-overlap-{os.getpid()}-{run}"
            try:
                print(one_run(url, args.count, args.concurrency, name), flush=True)
            finally:
                delete_keys(url, f"*{name}*")
    return 0


if __name__ == "__main__":
    sys.exit(main())
