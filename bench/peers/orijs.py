"""orijs_sync, through its public API (Queue, Worker, QueueEvents, Job)."""
from __future__ import annotations

import time

from orijs_sync import Queue, QueueEvents, Worker

from bench.peers import common
from bench.peers.common import QUEUE, CHUNK, WARMUP


def processor(job):
    return None


def warm(url):
    q = Queue("warm", connection=url)
    for i in range(WARMUP):
        q.add("job", {"i": i}, remove_on_complete=True)
    q.add_bulk([{"name": "job", "data": {"i": i}, "opts": {"remove_on_complete": True}}
                for i in range(WARMUP)])
    r = common.client(url)
    keys = list(r.scan_iter(match="bull:warm:*", count=1000))
    if keys:
        r.delete(*keys)
    r.close()
    q.close()


def fill(url, n, remove=True, paused=True, payload=0):
    """Untimed: N no-op jobs on a paused queue (the workers get ready before the resume)."""
    q = Queue(QUEUE, connection=url)
    if paused:
        q.pause()
    jobs = [{"name": "job", "data": common.job_data(i, payload),
             "opts": {"remove_on_complete": remove}} for i in range(n)]
    for chunk in common.chunks(jobs, CHUNK):
        q.add_bulk(chunk)
    q.close()


def seq_add(args):
    warm(args.url)
    q = Queue(QUEUE, connection=args.url)
    t0 = time.perf_counter()
    for i in range(args.n):
        q.add("job", {"i": i}, remove_on_complete=True)
    dt = time.perf_counter() - t0
    q.close()
    return common.rate(args.n, dt)


def bulk_add(args):
    warm(args.url)
    q = Queue(QUEUE, connection=args.url)
    jobs = [{"name": "job", "data": {"i": i}, "opts": {"remove_on_complete": True}} for i in range(args.n)]
    t0 = time.perf_counter()
    for chunk in common.chunks(jobs, CHUNK):
        q.add_bulk(chunk)
    dt = time.perf_counter() - t0
    q.close()
    return common.rate(args.n, dt)


def resume(url):
    q = Queue(QUEUE, connection=url)
    q.resume()
    q.close()


def run_worker_until(args, n, concurrency):
    """Start a worker on the paused queue, wait until it is blocked waiting for work,
    then time from the resume to its last completion."""
    completions = common.Completions(n)
    worker = Worker(QUEUE, processor, connection=args.url, concurrency=concurrency)
    worker.on("completed", completions)
    worker.start()
    try:
        common.wait_ready(args.url, 1)
        sampler = common.ProcSampler().start() if args.sample else None
        t0 = time.perf_counter()
        resume(args.url)
        if not completions.wait(args.timeout):
            raise RuntimeError(f"timed out at {completions.count}/{n}")
        usage = sampler.stop(n) if sampler else {}
    finally:
        worker.close(timeout=30)
    return common.rate(completions.count, completions.last - t0, concurrency=concurrency,
                       **usage)


def process(args):
    fill(args.url, args.n, payload=args.payload)
    return run_worker_until(args, args.n, args.concurrency)


def process_only(args):
    """``process`` on a paused queue someone else filled (bench/profile_worker.py)."""
    return run_worker_until(args, args.n, args.concurrency)


def child(args):
    rep = common.ChildReporter(args.url, args.child)
    worker = Worker(QUEUE, processor, connection=args.url, concurrency=args.concurrency)
    worker.on("completed", rep.completed)
    worker.start()
    rep.ready()
    rep.wait_stop(args.timeout)
    worker.close(timeout=30)
    rep.finish()
    return {"count": rep.count}


def rr(args):
    """queue.add + job.wait_until_finished(events); the worker runs in this process."""
    warm(args.url)
    q = Queue(QUEUE, connection=args.url)
    events = QueueEvents(QUEUE, connection=args.url)
    worker = Worker(QUEUE, processor, connection=args.url, concurrency=16).start()
    lat = []
    try:
        common.wait_ready(args.url, 2)  # the worker and the events reader
        t0 = time.perf_counter()
        for i in range(args.n):
            s = time.perf_counter()
            job = q.add("job", {"i": i}, remove_on_complete=False)
            job.wait_until_finished(events, timeout=10)
            lat.append(time.perf_counter() - s)
        total = time.perf_counter() - t0
    finally:
        worker.close(timeout=30)
        events.close()
        q.close()
    return common.latency_result(lat, total)


def emit(args):
    """The OriJS event layer: BullMQEventProvider.emit(...).result(), handler in this process."""
    try:
        from orijs_sync.events import BullMQEventProvider
    except ImportError as exc:
        return common.unsupported(f"orijs_sync.events is not importable: {exc}")
    provider = BullMQEventProvider(args.url).start()
    lat = []
    try:
        provider.subscribe("bench.rr", lambda message: None)
        for i in range(WARMUP):
            provider.emit("bench.rr", {"i": i}).result(timeout=10)
        t0 = time.perf_counter()
        for i in range(args.n):
            s = time.perf_counter()
            provider.emit("bench.rr", {"i": i}).result(timeout=10)
            lat.append(time.perf_counter() - s)
        total = time.perf_counter() - t0
    finally:
        provider.stop(timeout=30)
    return common.latency_result(lat, total)


def memory(args):
    fill(args.url, args.n, remove=False)
    run_worker_until(args, args.n, 16)
    r = common.client(args.url)
    try:
        ids = [m.decode() for m in r.zrange(f"bull:{QUEUE}:completed", 0, 199)]
        job_keys = {jid: common.bull_job_keys(QUEUE, jid) for jid in ids}
        return common.memory_result(r, job_keys, [f"bull:{QUEUE}:completed"], args.n)
    finally:
        r.close()


def proc(args):
    """The proc case with the handler on the worker's threads (concurrency threads), the
    baseline of orijs_sync's process mode (bench/peers/orijs_proc.py)."""
    from bench.peers import orijs_proc     # imports this module: not at the top
    return orijs_proc.run(args, processes=0)


CASES = {"seq_add": seq_add, "bulk_add": bulk_add, "process": process,
         "process_only": process_only, "child": child,
         "rr": rr, "emit": emit, "memory": memory, "proc": proc}


def main():
    args = common.parse_args()
    if args.case == "multi":
        result = common.run_multi(args, "bench.peers.orijs", lambda n: fill(args.url, n),
                                  lambda: resume(args.url))
    else:
        result = CASES[args.case](args)
    common.emit(result)


if __name__ == "__main__":
    main()
