#!/usr/bin/env python
"""Workflows/s of a 3-step workflow beside plain jobs/s, in the same run, same Redis.

    python bench/bench_workflows.py                    # $REDIS_URL, else a redis-server it starts
    python bench/bench_workflows.py --count 2000 --concurrency 16
    python bench/bench_workflows.py --url redis://127.0.0.1:6379/0

Two shapes, each measured for plain jobs and for workflows:

- ``burst``: ``count`` submissions back to back (``Queue.add`` / ``provider.execute``),
  then wait for every outcome (a QueueEvents ``completed`` listener / the handle):
  throughput.
- ``sequential``: ``count / 4`` submissions, each waited for before the next: latency.

Then ``interleaved``: about ``count / 4`` plain request-responses (``add`` +
``wait_until_finished``) and as many workflow ``execute().result()`` calls, in
alternated blocks of 25, so both p50s come from the same minutes.

One process plays both sides (the workers and the caller). A 3-step workflow is 4
jobs in Redis (3 steps + the workflow job, each taking children values and writing
a result wrapper), so a ratio near 1/4 of plain jobs is the expected order. Prints
the figures; asserts nothing. Run by hand.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from orijs_sync import Queue, QueueEvents, Worker  # noqa: E402
from orijs_sync.testing import delete_keys, local_redis  # noqa: E402
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow  # noqa: E402


def burst(submit: Callable[[int], object], wait: Callable[[object], object],
          count: int) -> float:
    started = time.perf_counter()
    pending = [submit(n) for n in range(count)]
    for item in pending:
        wait(item)
    return count / (time.perf_counter() - started)


def sequential(submit: Callable[[int], object], wait: Callable[[object], object],
               count: int) -> List[float]:
    """Sorted latencies of ``count`` submissions, each waited for before the next."""
    return sorted(timed(lambda n: wait(submit(n)), count))


def timed(call: Callable[[int], object], count: int) -> List[float]:
    """Seconds taken by each of ``count`` calls, in order."""
    samples = []
    for n in range(count):
        t0 = time.perf_counter()
        call(n)
        samples.append(time.perf_counter() - t0)
    return samples


def report(label: str, rate: float, samples: List[float]) -> None:
    p50 = samples[len(samples) // 2] * 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000
    burst_text = f"burst {rate:8.1f}/s" if rate else " " * 16
    print(f"{label:<22} {burst_text}   sequential p50 {p50:7.2f} ms  "
          f"p99 {p99:7.2f} ms  mean {statistics.fmean(samples) * 1000:7.2f} ms")


def run(url: str, count: int, concurrency: int) -> None:
    tag = f"bench-wf-{uuid.uuid4().hex[:8]}"
    try:
        # -- plain jobs -----------------------------------------------------
        queue = Queue(f"{tag}-plain", connection=url)
        events = QueueEvents([queue.name], connection=url)
        finished: Dict[str, object] = {}
        cond = threading.Condition()

        def on_completed(job_id: str, value: object) -> None:   # the events thread
            with cond:
                finished[job_id] = value
                cond.notify_all()

        def done(job: Any) -> object:
            with cond:
                if not cond.wait_for(lambda: job.id in finished, timeout=60):
                    raise TimeoutError(f"job {job.id} did not finish")
                return finished.pop(job.id)

        events.on("completed", on_completed)
        worker = Worker(queue.name, lambda job: {"n": job.data["n"]}, connection=url,
                        concurrency=concurrency).start()
        try:
            add = lambda n: queue.add("job", {"n": n})                       # noqa: E731
            burst(add, done, min(200, count))                                   # warm-up
            plain_rate = burst(add, done, count)
            plain_seq = sequential(add, done, max(count // 4, 1))
        finally:
            worker.close()
            events.close()
            queue.close()
        # -- 3-step workflows ----------------------------------------------
        wf = (Workflow("Bench")
              .step("a", lambda ctx: {"a": ctx.data["n"]})
              .step("b", lambda ctx: {"b": ctx.get_result("a")["a"] + 1})
              .step("c", lambda ctx: {"c": ctx.get_result("b")["b"] + 1}))
        provider = BullMQWorkflowProvider(url, queue_prefix=f"{tag}.workflow",
                                          concurrency=concurrency)
        provider.register(wf)
        with provider:
            execute = lambda n: provider.execute(wf, {"n": n})                 # noqa: E731
            result = lambda handle: handle.result(timeout=120)                 # noqa: E731
            burst(execute, result, min(200, count))                            # warm-up
            wf_rate = burst(execute, result, count)
            wf_seq = sequential(execute, result, max(count // 4, 1))
        print(f"count {count} (sequential {max(count // 4, 1)}), concurrency {concurrency}, "
              f"cores {os.cpu_count()}")
        report("plain job", plain_rate, plain_seq)
        report("3-step workflow", wf_rate, wf_seq)
        print(f"{'ratio':<22} burst {wf_rate / plain_rate:8.3f}    (workflows/s / jobs/s; "
              "a workflow here is 4 jobs)")
        interleaved(url, tag, max(count // 4, 1), concurrency)
    finally:
        delete_keys(url, f"*{tag}*")


BLOCK = 25        # samples of one kind in a row in interleaved()


def interleaved(url: str, tag: str, count: int, concurrency: int) -> None:
    """The latency ratio with both sides under the same conditions: blocks of
    ``BLOCK`` plain request-responses (``add`` + ``wait_until_finished``) and of
    ``BLOCK`` workflow ``execute().result()`` calls alternated, ``count`` of each, both
    workers running all along (on this machine the speed of a minute can differ from
    the next by 2 x, so measured one after the other the two p50s can come from
    different minutes). Within a block each call follows one of its kind, as in
    ``sequential``; the first of each block, which follows the other kind (a workflow's
    threads still finish writing after the caller has its answer), is not counted."""
    queue = Queue(f"{tag}-rr", connection=url)
    events = QueueEvents([queue.name], connection=url)
    worker = Worker(queue.name, lambda job: {"n": job.data["n"]}, connection=url,
                    concurrency=concurrency).start()
    wf = (Workflow("Pair")
          .step("a", lambda ctx: {"a": ctx.data["n"]})
          .step("b", lambda ctx: {"b": ctx.get_result("a")["a"] + 1})
          .step("c", lambda ctx: {"c": ctx.get_result("b")["b"] + 1}))
    provider = BullMQWorkflowProvider(url, queue_prefix=f"{tag}.pair", concurrency=concurrency)
    provider.register(wf)
    rr = lambda n: queue.add("job", {"n": n}).wait_until_finished(events, timeout=60)  # noqa: E731
    run = lambda n: provider.execute(wf, {"n": n}).result(timeout=60)               # noqa: E731
    plain: List[float] = []
    flows: List[float] = []
    try:
        with provider:
            timed(rr, 200)                                                # warm-up
            timed(run, 200)
            for _ in range(max(count // (BLOCK - 1), 1)):
                plain += timed(rr, BLOCK)[1:]
                flows += timed(run, BLOCK)[1:]
    finally:
        worker.close()
        events.close()
        queue.close()
    plain.sort()
    flows.sort()
    report("interleaved: plain rr", 0.0, plain)
    report("interleaved: workflow", 0.0, flows)
    ratio = flows[len(flows) // 2] / plain[len(plain) // 2]
    print(f"{'interleaved ratio':<22} p50 {ratio:5.2f} x   (workflow p50 / plain "
          f"request-response p50, {len(plain)} of each in blocks of {BLOCK})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--url", default=None, help="Redis URL (default: $REDIS_URL or a "
                                                     "redis-server started for the run)")
    args = parser.parse_args()
    with local_redis(args.url) as url:
        run(url, args.count, args.concurrency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
