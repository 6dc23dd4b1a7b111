#!/usr/bin/env python
"""The floor of one request-response in Python: its Redis calls on one thread, no hand-offs.

    python bench/bench_floor.py                      # 3,000 rounds, a redis-server it starts
    python bench/bench_floor.py --count 5000 --url redis://127.0.0.1:6379/0

A request-response (``queue.add(...)`` then ``job.wait_until_finished(events)``, the
``rr`` case of ``bench/run.py``) needs four Redis round trips, in BullMQ for Node as
here: the add, the worker's take (``moveToActive``), its write (``moveToFinished``),
and the events reader's ``XREAD`` that brings the outcome back. This runs exactly those
calls in order on one thread, through orijs_sync's own code paths (``Queue.add``, the
worker's take and write on its raw connection, a plain ``XREAD``), so no thread wakes
another and no GIL changes hands. What it prints is the least a threaded
request-response can cost in this process: each part's p50, the whole p50 and p99,
and Redis's own µs per call of each command (``INFO commandstats``). Asserts nothing;
run by hand.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import redis  # noqa: E402

from orijs_sync import Queue, Worker  # noqa: E402
from orijs_sync.testing import local_redis  # noqa: E402

PARTS = ("add", "take", "run", "write", "xread", "total")


def rounds(url: str, count: int) -> Dict[str, List[float]]:
    queue = Queue("floor", connection=url)
    worker = Worker("floor", lambda job: None, connection=url)    # never started
    reader = redis.Redis.from_url(url, decode_responses=True)
    last: Any = reader.xrevrange(queue.keys.events, count=1)
    position = str(last[0][0]) if last else "0-0"
    times: Dict[str, List[float]] = {part: [] for part in PARTS}
    try:
        for i in range(count + count // 10):
            marks = [time.perf_counter()]
            job = queue.add("job", {"i": i}, remove_on_complete=True)
            marks.append(time.perf_counter())
            taken = worker._move_to_active(1)[0][0]
            taken._worker = worker
            taken._read_taken()
            marks.append(time.perf_counter())
            outcome = worker._runner.process(taken)
            marks.append(time.perf_counter())
            worker._runner.finish([outcome] if outcome else [], 0)
            marks.append(time.perf_counter())
            position = read_outcome(reader, queue.keys.events, position, job.id)
            marks.append(time.perf_counter())
            if i >= count // 10:                       # the first tenth warms up
                for part, start, end in zip(PARTS, marks, marks[1:]):
                    times[part].append(end - start)
                times["total"].append(marks[-1] - marks[0])
    finally:
        worker.close()
        queue.close()
        reader.close()
    return times


def read_outcome(reader: redis.Redis, stream: str, position: str, job_id: str) -> str:
    """Read the stream from ``position`` until the job's outcome; the new position."""
    while True:
        reply: Any = reader.xread({stream: position}, count=100, block=1000)
        for _, entries in reply or []:
            for entry_id, fields in entries:
                position = entry_id
                if fields.get("jobId") == job_id and fields.get("event") in ("completed",
                                                                             "failed"):
                    return position


def percentile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def command_stats(url: str) -> Dict[str, Dict[str, float]]:
    client = redis.Redis.from_url(url)
    try:
        stats: Any = client.info("commandstats")
    finally:
        client.close()
    return {name: stats.get(f"cmdstat_{name}", {"calls": 0, "usec": 0})
            for name in ("evalsha", "xread")}


def report(times: Dict[str, List[float]], before: Dict[str, Dict[str, float]],
           after: Dict[str, Dict[str, float]]) -> None:
    for part in PARTS:
        print(f"{part:6} p50 {percentile(times[part], 0.5):6.3f} ms", end="")
        print(f"   p99 {percentile(times[part], 0.99):6.3f} ms" if part == "total" else "")
    for name in after:            # this run's calls only (a shared Redis has others)
        calls = after[name]["calls"] - before[name]["calls"]
        if calls:
            usec = (after[name]["usec"] - before[name]["usec"]) / calls
            print(f"Redis {name:8} {usec:7.2f} µs per call ({calls} calls)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--url", default=None, help="Redis URL (default: a redis-server "
                        "started on a free loopback port, stopped at the end)")
    args = parser.parse_args()
    with local_redis(args.url) as url:
        before = command_stats(url)
        times = rounds(url, args.count)
        report(times, before, command_stats(url))


if __name__ == "__main__":
    main()
