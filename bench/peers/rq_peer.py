"""RQ with SimpleWorker (no fork per job), burst mode; RQ has no in-process concurrency.
The proc case runs RQ's default Worker instead, which forks a work horse per job."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

from redis import Redis
from rq import Queue, SimpleWorker, Worker

from bench.peers import childmem, common, cpu_tasks
from bench.peers.common import QUEUE, WARMUP

FUNC = "bench.peers.common.noop"
PROC_FUNCS = {"cpu": "bench.peers.cpu_tasks.cpu_job", "noop": "bench.peers.cpu_tasks.noop"}


def queue(url):
    return Queue(QUEUE, connection=Redis.from_url(url))


def warm(url):
    q = Queue("warm", connection=Redis.from_url(url))
    for i in range(WARMUP):
        q.enqueue(FUNC, i, result_ttl=0)
    q.enqueue_many([Queue.prepare_data(FUNC, (i,), result_ttl=0) for i in range(WARMUP)])
    q.empty()


def fill(url, n, result_ttl=0, func=FUNC):
    q = queue(url)
    datas = [Queue.prepare_data(func, (i,), result_ttl=result_ttl) for i in range(n)]
    for chunk in common.chunks(datas):
        q.enqueue_many(chunk)


def seq_add(args):
    warm(args.url)
    q = queue(args.url)
    t0 = time.perf_counter()
    for i in range(args.n):
        q.enqueue(FUNC, i, result_ttl=0)
    return common.rate(args.n, time.perf_counter() - t0)


def bulk_add(args):
    warm(args.url)
    q = queue(args.url)
    datas = [Queue.prepare_data(FUNC, (i,), result_ttl=0) for i in range(args.n)]
    t0 = time.perf_counter()
    for chunk in common.chunks(datas):
        q.enqueue_many(chunk)
    return common.rate(args.n, time.perf_counter() - t0)


class CountingWorker(SimpleWorker):
    """SimpleWorker that counts its successes locally (RQ keeps the count in Redis);
    ``last`` is the ``perf_counter()`` of the latest, ``on_success`` a hook."""
    done = 0
    last = 0.0
    on_success = None

    def handle_job_success(self, *args, **kwargs):
        super().handle_job_success(*args, **kwargs)
        self.done += 1
        self.last = time.perf_counter()
        if self.on_success:
            self.on_success()


def work_until_idle(w):
    """Not burst: the worker blocks in BLPOP on the held (empty) queue until the
    release, and exits after 1 s without work (after its last completion)."""
    w.work(burst=False, logging_level="WARNING", max_idle_time=1)


def worker(url):
    q = queue(url)
    return CountingWorker([q], connection=q.connection, log_job_description=False)


def process(args):
    if args.concurrency != 1:
        return common.unsupported("RQ runs one job at a time per worker process")
    fill(args.url, args.n)
    key = queue(args.url).key
    common.hold(args.url, key)
    w = worker(args.url)
    started = {}

    def release_when_ready():  # RQ's work loop needs the main thread
        common.wait_ready(args.url, 1)
        started["t0"] = time.perf_counter()
        common.release(args.url, key)

    releaser = threading.Thread(target=release_when_ready, daemon=True)
    releaser.start()
    work_until_idle(w)
    releaser.join(timeout=60)
    return common.rate(w.done, w.last - started["t0"], concurrency=1)


def child(args):
    rep = common.ChildReporter(args.url, args.child)
    w = worker(args.url)
    w.on_success = rep.completed
    rep.ready()  # the parent then waits for this worker's BLPOP
    work_until_idle(w)
    rep.publish()
    rep.wait_stop(args.timeout)
    rep.finish()
    return {"count": rep.count}


def rr_worker(args):
    w = worker(args.url)
    w.work(burst=False, logging_level="WARNING")
    return {}


def rr(args):
    """enqueue + job.latest_result(timeout=...) (XREAD on the job's results
    stream); the SimpleWorker runs in a second process (its work loop needs the
    main thread)."""
    warm(args.url)
    q = queue(args.url)
    p = subprocess.Popen([sys.executable, "-m", "bench.peers.rq_peer", "--case", "rr_worker",
                          "--url", args.url], stdout=subprocess.DEVNULL)
    lat = []
    try:
        q.enqueue(FUNC, -1).latest_result(timeout=30)  # worker up
        t0 = time.perf_counter()
        for i in range(args.n):
            s = time.perf_counter()
            job = q.enqueue(FUNC, i, result_ttl=60)
            if job.latest_result(timeout=10) is None:
                raise RuntimeError("no result")
            lat.append(time.perf_counter() - s)
        total = time.perf_counter() - t0
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
    return common.latency_result(lat, total, note="latest_result(timeout), worker in another process")


def memory(args):
    fill(args.url, args.n, result_ttl=3600)
    w = worker(args.url)
    w.work(burst=True, logging_level="WARNING")
    r = common.client(args.url)
    try:
        ids = [m.decode() for m in r.zrange(f"rq:finished:{QUEUE}", 0, 199)]
        job_keys = {jid: [f"rq:job:{jid}", f"rq:results:{jid}", f"rq:job:{jid}:dependents",
                          f"rq:job:{jid}:dependencies"] for jid in ids}
        return common.memory_result(r, job_keys, [f"rq:finished:{QUEUE}"], args.n)
    finally:
        r.close()


class ForkingCountingWorker(Worker):
    """RQ's default Worker: a work horse forked per job. ``execute_job`` returns in the
    worker process once its horse has exited (the job done): counted there."""
    on_done = None

    def execute_job(self, job, queue):
        super().execute_job(job, queue)
        if self.on_done:
            self.on_done()


def proc_child(args):
    """One worker process of the proc case (not burst: see work_until_idle)."""
    rep = common.ChildReporter(args.url, args.child)
    q = queue(args.url)
    w = ForkingCountingWorker([q], connection=q.connection, log_job_description=False)
    w.on_done = rep.completed
    rep.ready()
    work_until_idle(w)
    rep.publish()
    rep.wait_stop(args.timeout)
    rep.finish()
    return {"count": rep.count}


def proc(args):
    """``--procs`` forking workers, each one job at a time in a horse; the horses (this
    process's grandchildren) sampled for memory."""
    key = queue(args.url).key
    job_ms = cpu_tasks.job_ms() if args.handler == "cpu" else None

    def fill_held(n):
        fill(args.url, n, func=PROC_FUNCS[args.handler])
        common.hold(args.url, key)
    memory = childmem.ChildMemory(childmem.own_grandchildren).start()
    result = common.run_multi(args, "bench.peers.rq_peer", fill_held,
                              lambda: common.release(args.url, key), child_concurrency=1,
                              child_case="proc_child", child_args=["--handler", args.handler])
    result.update(memory.stop())
    result.update(handler=args.handler, processes=args.procs, job_ms=job_ms)
    return result


CASES = {"seq_add": seq_add, "bulk_add": bulk_add, "process": process, "child": child,
         "rr": rr, "rr_worker": rr_worker, "memory": memory, "proc": proc,
         "proc_child": proc_child}


def main():
    args = common.parse_args()
    if args.case == "multi":
        key = queue(args.url).key

        def fill_held(n):
            fill(args.url, n)
            common.hold(args.url, key)
        result = common.run_multi(args, "bench.peers.rq_peer", fill_held,
                                  lambda: common.release(args.url, key), child_concurrency=1)
    else:
        result = CASES[args.case](args)
    common.emit(result)


if __name__ == "__main__":
    main()
