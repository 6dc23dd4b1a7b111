"""RQ with SimpleWorker (no fork per job), burst mode; RQ has no in-process concurrency."""
from __future__ import annotations

import subprocess
import sys
import time

from redis import Redis
from rq import Queue, SimpleWorker

from bench.peers import common
from bench.peers.common import QUEUE, WARMUP

FUNC = "bench.peers.common.noop"


def queue(url):
    return Queue(QUEUE, connection=Redis.from_url(url))


def warm(url):
    q = Queue("warm", connection=Redis.from_url(url))
    for i in range(WARMUP):
        q.enqueue(FUNC, i, result_ttl=0)
    q.enqueue_many([Queue.prepare_data(FUNC, (i,), result_ttl=0) for i in range(WARMUP)])
    q.empty()


def fill(url, n, result_ttl=0):
    q = queue(url)
    datas = [Queue.prepare_data(FUNC, (i,), result_ttl=result_ttl) for i in range(n)]
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
    """SimpleWorker that counts its successes locally (RQ keeps the count in Redis)."""
    done = 0

    def handle_job_success(self, *args, **kwargs):
        super().handle_job_success(*args, **kwargs)
        self.done += 1


def worker(url):
    q = queue(url)
    return CountingWorker([q], connection=q.connection, log_job_description=False)


def process(args):
    if args.concurrency != 1:
        return common.unsupported("RQ runs one job at a time per worker process")
    fill(args.url, args.n)
    w = worker(args.url)
    t0 = time.perf_counter()
    w.work(burst=True, logging_level="WARNING")
    dt = time.perf_counter() - t0
    return common.rate(w.done, dt, concurrency=1)


def child(args):
    rep = common.ChildReporter(args.url, args.child)
    w = worker(args.url)
    rep.ready_and_wait_go()
    w.work(burst=True, logging_level="WARNING")
    with rep._lock:
        rep.count = w.done
        rep.last = time.time()
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


CASES = {"seq_add": seq_add, "bulk_add": bulk_add, "process": process, "child": child,
         "rr": rr, "rr_worker": rr_worker, "memory": memory}


def main():
    args = common.parse_args()
    if args.case == "multi":
        result = common.run_multi(args, "bench.peers.rq_peer", lambda n: fill(args.url, n),
                                  child_concurrency=1)
    else:
        result = CASES[args.case](args)
    common.emit(result)


if __name__ == "__main__":
    main()
