#!/usr/bin/env python
"""The dashboard with 1,000,000 jobs in a state and 1,000 queues: how long each page
takes to answer (over HTTP, a threaded wsgiref server in this process), on a
redis-server this script starts and stops.

    python bench/dashboard_bench.py                     # 1,000,000 jobs, 1,000 queues
    python bench/dashboard_bench.py --jobs 200000 --repeat 50

The jobs are written by one Lua script run in chunks (hashes plus the ``completed``
zset and the ``wait`` list), so the setup takes seconds. The target is every page
under 300 ms; the figures are printed, never asserted. Run by hand.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import urllib.request
from typing import List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import redis  # noqa: E402

from orijs_sync.cli.dashboard_cmd import threaded_server  # noqa: E402
from orijs_sync.dashboard import Dashboard  # noqa: E402
from orijs_sync.testing import RedisServer  # noqa: E402

# KEYS[1] the state's key; ARGV: key base, first id, count, "zset" or "list", now (ms)
FILL = """
local base, first, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local kind, now = ARGV[4], tonumber(ARGV[5])
for n = first, first + count - 1 do
  local id = tostring(n)
  redis.call("HSET", base .. id, "name", "job-" .. id, "data", '{"n":' .. id .. '}',
             "opts", '{"attempts":1}', "timestamp", now - 1000000 + n,
             "processedOn", now - 999000 + n, "finishedOn", now - 998000 + n,
             "returnvalue", "1", "atm", "1")
  if kind == "zset" then
    redis.call("ZADD", KEYS[1], now - 998000 + n, id)
  else
    redis.call("LPUSH", KEYS[1], id)
  end
end
return count
"""


def fill(client: redis.Redis, jobs: int, queues: int, chunk: int = 50_000) -> float:
    started = time.perf_counter()
    script = client.register_script(FILL)
    now = int(time.time() * 1000)
    for queue, key, kind in (("big", "bull:big:completed", "zset"),
                             ("biglist", "bull:biglist:wait", "list")):
        client.hset(f"bull:{queue}:meta", "opts.maxLenEvents", 10000)
        for first in range(1, jobs + 1, chunk):
            script(keys=[key], args=[f"bull:{queue}:", first, min(chunk, jobs - first + 1),
                                     kind, now])
    pipe = client.pipeline(transaction=False)
    for i in range(queues):
        pipe.hset(f"bull:q{i:04d}:meta", "opts.maxLenEvents", 10000)
        pipe.hset(f"bull:q{i:04d}:1", mapping={"name": "n", "data": "{}", "opts": "{}",
                                              "timestamp": now})
        pipe.lpush(f"bull:q{i:04d}:wait", "1")
    pipe.execute()
    return time.perf_counter() - started


def timed(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as reply:
        reply.read()
        assert reply.status == 200, url
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        seconds = fill(client, args.jobs, args.queues)
        print(f"setup: {args.jobs:,} completed + {args.jobs:,} waiting jobs, "
              f"{args.queues:,} queues, {client.dbsize():,} keys in {seconds:.1f} s")
        with Dashboard(server.url) as board:
            httpd = threaded_server(board, log_requests=False)
            thread = threading.Thread(target=httpd.serve_forever, daemon=True)
            thread.start()
            base = f"http://127.0.0.1:{httpd.server_port}"
            size = board.page_size
            cold = timed(base + "/queues")
            during = timed(base + "/queues")
            started = time.perf_counter()
            while not board.queues.complete:
                time.sleep(0.05)
            print(f"queue list: first request {cold * 1000:.0f} ms, next one during the first "
                  f"SCAN pass {during * 1000:.0f} ms; the pass ended "
                  f"{time.perf_counter() - started + cold + during:.1f} s after the first request")
            middle = args.jobs // 2
            pages: List[Tuple[str, str]] = [
                ("queues, page 1 of 20", "/queues"),
                ("queues, page 20 of 20", "/queues?page=20"),
                ("queue 'big' (counts, chart, workers)", "/queues/big"),
                ("1M completed, first page", "/queues/big/completed"),
                ("1M completed, page 20,000", "/queues/big/completed?page=20000"),
                ("1M completed, last page", f"/queues/big/completed?page={args.jobs // size}"),
                ("1M completed, search by name (newest 1000)",
                 "/queues/big/completed?name=job-99"),
                ("1M completed, search by id", f"/queues/big/completed?id={middle}"),
                ("1M waiting (list), first page", "/queues/biglist/wait"),
                ("1M waiting (list), page 20,000", "/queues/biglist/wait?page=20000"),
                ("a job's page", f"/queues/big/jobs/{middle}"),
            ]
            print(f"{'page':48} {'median':>9} {'p95':>9} {'max':>9}")
            for label, path in pages:
                times = sorted(timed(base + path) for _ in range(args.repeat))
                p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
                print(f"{label:48} {statistics.median(times) * 1000:7.1f}ms "
                      f"{p95 * 1000:7.1f}ms {times[-1] * 1000:7.1f}ms")
            httpd.shutdown()
            httpd.server_close()
            thread.join(10)
        client.close()


if __name__ == "__main__":
    main()
