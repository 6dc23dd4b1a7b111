#!/usr/bin/env python
"""Redis's own time per request: a plain request-response beside a 3-step workflow.

    python bench/bench_redis_time.py        # starts a redis-server of its own

Both run by Workers of this process, 1,000 of each after a warm-up; ``INFO
commandstats`` before and after gives the script calls per request, their mean cost,
and the total Redis time per request. Prints the figures; asserts nothing.
"""
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import time, redis
from orijs_sync import Queue, QueueEvents, Worker
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow
from orijs_sync.testing import local_redis
def stats(r):
    s = r.info("commandstats"); return {k: (v["calls"], v["usec"]) for k, v in s.items()}
def delta(a, b):
    out = {}
    for k, (c, u) in b.items():
        c0, u0 = a.get(k, (0, 0))
        if c - c0: out[k] = (c - c0, u - u0)
    return out
N = 1000
with local_redis() as url:
    r = redis.Redis.from_url(url)
    q = Queue("rr", url); ev = QueueEvents("rr", connection=url)
    w = Worker("rr", lambda j: 1, connection=url, concurrency=10).start()
    wf = (Workflow("Pair").step("a", lambda c: 1).step("b", lambda c: 2).step("c", lambda c: 3))
    p = BullMQWorkflowProvider(url, queue_prefix="t.pair", concurrency=10); p.register(wf)
    with p:
        for i in range(200): q.add("x", {}).wait_until_finished(ev, 5); p.execute(wf, {"n": i}).result(timeout=10)
        for label, fn in (("rr", lambda i: q.add("x", {"n": i}).wait_until_finished(ev, 5)),
                          ("workflow", lambda i: p.execute(wf, {"n": i}).result(timeout=10))):
            a = stats(r); lat = []
            for i in range(N):
                t = time.perf_counter(); fn(i); lat.append(time.perf_counter() - t)
            d = delta(a, stats(r)); lat.sort()
            tot_us = sum(u for k, (c, u) in d.items() if k != "cmdstat_info")
            print(f"{label}: p50 {lat[N//2]*1e3:.3f} ms; per request: " + ", ".join(
                f"{k[8:]} {c/N:.1f}x {u/c:.0f}us" for k, (c, u) in sorted(d.items(), key=lambda kv: -kv[1][1]) if k != "cmdstat_info" and c >= N / 10)
                + f"; Redis time {tot_us/N:.0f} us")
    w.close(); ev.close()
