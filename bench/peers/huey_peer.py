"""Huey (RedisHuey, blocking dequeue) with its thread consumer, run in-process; the proc
case with its process consumer (``-k process -w N``), also started from this process."""
from __future__ import annotations

import logging
import threading
import time

from huey import RedisHuey, signals

from bench.peers import childmem, common, cpu_tasks
from bench.peers.common import WARMUP

logging.getLogger("huey").setLevel(logging.WARNING)


def make_huey(url, notify=False):
    huey = RedisHuey("bench", url=url, notify_result=notify)
    noop = huey.task(name="noop")(lambda i=None: None)
    echo = huey.task(name="echo")(lambda i=None: True)
    return huey, noop, echo


def warm(huey, noop):
    for i in range(WARMUP):
        noop(i)
    huey.flush()


def fill(url, n):
    """Untimed: LPUSH the serialized messages in pipelines of 500, onto the held list
    (Huey has no pause; ``release`` puts it in place once the consumers are ready)."""
    huey, noop, _ = make_huey(url)
    conn = huey.storage.conn
    for chunk in common.chunks(list(range(n))):
        pipe = conn.pipeline(transaction=False)
        for i in chunk:
            pipe.lpush(common.HELD_KEY, huey.serialize_task(noop.s(i)))
        pipe.execute()


def release(url):
    huey, _, _ = make_huey(url)
    common.release(url, huey.storage.queue_key)


def seq_add(args):
    huey, noop, _ = make_huey(args.url)
    warm(huey, noop)
    t0 = time.perf_counter()
    for i in range(args.n):
        noop(i)
    return common.rate(args.n, time.perf_counter() - t0)


class Counter:
    def __init__(self, n, on_complete=None):
        self.n = n
        self.count = 0
        self.last = 0.0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.on_complete = on_complete

    def __call__(self, signal, task, *a, **k):
        with self.lock:
            self.count += 1
            self.last = time.perf_counter()
            if self.count >= self.n:
                self.done.set()
        if self.on_complete:
            self.on_complete()


def consumer(huey, workers):
    return huey.create_consumer(workers=workers, worker_type="thread", periodic=False,
                                initial_delay=0.001, max_delay=0.1, check_worker_health=False)


def process(args):
    fill(args.url, args.n)
    huey, noop, _ = make_huey(args.url)
    counter = Counter(args.n)
    huey.signal(signals.SIGNAL_COMPLETE)(counter)
    c = consumer(huey, args.concurrency)
    c.start()
    try:
        common.wait_ready(args.url, args.concurrency)  # every consumer thread in BRPOP
        t0 = time.perf_counter()
        release(args.url)
        if not counter.done.wait(args.timeout):
            raise RuntimeError(f"timed out at {counter.count}/{args.n}")
    finally:
        c.stop(graceful=True)
    return common.rate(counter.count, counter.last - t0, concurrency=args.concurrency)


def child(args):
    rep = common.ChildReporter(args.url, args.child)
    huey, noop, _ = make_huey(args.url)
    huey.signal(signals.SIGNAL_COMPLETE)(lambda *a, **k: rep.completed())
    c = consumer(huey, args.concurrency)
    c.start()
    rep.ready()
    rep.wait_stop(args.timeout)
    c.stop(graceful=True)
    rep.finish()
    return {"count": rep.count}


def rr(args):
    """task(...).get(blocking=True) with notify_result=True (BLPOP on a notify key)."""
    huey, noop, echo = make_huey(args.url, notify=True)
    warm(huey, noop)
    c = consumer(huey, 16)
    c.start()
    lat = []
    try:
        common.wait_ready(args.url, 16)
        t0 = time.perf_counter()
        for i in range(args.n):
            s = time.perf_counter()
            echo(i).get(blocking=True, timeout=10)
            lat.append(time.perf_counter() - s)
        total = time.perf_counter() - t0
    finally:
        c.stop(graceful=True)
    return common.latency_result(lat, total, note="result(blocking=True), notify_result")


def proc_huey(url):
    huey = RedisHuey("bench", url=url)
    tasks = {"cpu": huey.task(name="cpu")(cpu_tasks.cpu_job),
             "noop": huey.task(name="noop")(cpu_tasks.noop)}
    return huey, tasks


def fill_held(huey, task, n):
    """Untimed, as ``fill``: the serialized messages onto the held list."""
    conn = huey.storage.conn
    for chunk in common.chunks(list(range(n))):
        pipe = conn.pipeline(transaction=False)
        for i in chunk:
            pipe.lpush(common.HELD_KEY, huey.serialize_task(task.s(i)))
        pipe.execute()


def proc(args):
    """``--procs`` worker processes (worker_type "process"), each one task at a time."""
    job_ms = cpu_tasks.job_ms() if args.handler == "cpu" else None
    huey, tasks = proc_huey(args.url)
    fill_held(huey, tasks[args.handler], args.n)
    counter = common.SharedCounter()
    huey.signal(signals.SIGNAL_COMPLETE)(counter)
    c = huey.create_consumer(workers=args.procs, worker_type="process", periodic=False,
                             initial_delay=0.001, max_delay=0.1, check_worker_health=False)
    c.start()
    try:
        common.wait_ready(args.url, args.procs)       # every worker process in BRPOP
        memory = childmem.ChildMemory(lambda: [p.pid for _, p in c.worker_threads]).start()
        t0 = time.time()
        common.release(args.url, huey.storage.queue_key)
        count, last = counter.wait(args.n, args.timeout)
        fields = memory.stop()
    finally:
        c.stop(graceful=True)
    return common.rate(count, last - t0, handler=args.handler, processes=args.procs,
                       job_ms=job_ms, **fields)


CASES = {"seq_add": seq_add, "process": process, "child": child, "rr": rr, "proc": proc}


def main():
    args = common.parse_args()
    if args.case == "multi":
        result = common.run_multi(args, "bench.peers.huey_peer", lambda n: fill(args.url, n),
                                  lambda: release(args.url), blocked_per_proc=args.concurrency)
    elif args.case == "bulk_add":
        result = common.unsupported("Huey has no bulk enqueue")
    elif args.case == "memory":
        result = common.unsupported("Huey keeps no record of a completed task")
    else:
        result = CASES[args.case](args)
    common.emit(result)


if __name__ == "__main__":
    main()
