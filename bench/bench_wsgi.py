#!/usr/bin/env python
"""examples/wsgi.py under a real gunicorn: req/s, p50 and p99 per worker mode, for the
view that emits an event and waits for the subscriber's answer (``POST /orders``)
beside the same server's plain view (``GET /ping``, no Redis).

    python bench/bench_wsgi.py                    # $REDIS_URL, else a redis-server it starts
    python bench/bench_wsgi.py --requests 2000 --clients 32 --workers 2

Modes: sync and gthread workers, each with and without ``--preload``. The subscriber
(``python -m examples.wsgi subscriber``) runs in its own process. Every answer is
checked; the figures are printed, never asserted. Run by hand.
"""
from __future__ import annotations

import argparse
import os
import sys
import uuid
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "deploy"))

from gunicorn_load import Gunicorn, Subscriber, expected, fire  # noqa: E402
from orijs_sync.testing import delete_keys, local_redis  # noqa: E402

from bench.bench_emit import percentile  # noqa: E402


def figures(run: Dict[str, Any]) -> str:
    lat: List[float] = sorted(run["latencies"])
    rate = len(lat) / run["seconds"]
    return (f"{rate:8.0f} req/s  p50 {percentile(lat, 50) * 1000:7.1f} ms  "
            f"p99 {percentile(lat, 99) * 1000:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    prefix = f"bench{uuid.uuid4().hex[:8]}.wsgi"
    with local_redis(args.url) as url, Subscriber(url, prefix):
        print(f"{args.requests} requests, {args.clients} clients, {args.workers} gunicorn "
              f"workers (gthread: {args.threads} threads each), {os.cpu_count()} cores")
        for worker_class in ("sync", "gthread"):
            for preload in (False, True):
                mode = f"{worker_class:7} {'--preload' if preload else 'no-preload':10}"
                with Gunicorn(url, prefix, worker_class=worker_class, preload=preload,
                              workers=args.workers, threads=args.threads) as server:
                    fire(server.port, 100, args.clients)      # warm-up, not counted
                    plain = fire(server.port, args.requests, args.clients, "/ping")
                    emit = fire(server.port, args.requests, args.clients)
                wrong = sum(1 for n, a in emit["answers"].items() if a != (201, expected(n)))
                print(f"{mode}  plain {figures(plain)}")
                print(f"{mode}  emit  {figures(emit)}  wrong answers: {wrong}")
        delete_keys(url, f"*{prefix}*")


if __name__ == "__main__":
    main()
