"""bullmq for Python (asyncio), through its public API."""
from __future__ import annotations

import asyncio
import time

from bullmq import Queue, QueueEvents, Worker

from bench.peers import common
from bench.peers.common import QUEUE, CHUNK, WARMUP


async def processor(job, token):
    return None


def conn(url):
    return {"connection": url}


async def warm(url):
    q = Queue("warm", conn(url))
    for i in range(WARMUP):
        await q.add("job", {"i": i}, {"removeOnComplete": True})
    await q.addBulk([{"name": "job", "data": {"i": i}, "opts": {"removeOnComplete": True}}
                     for i in range(WARMUP)])
    await q.obliterate(force=True)
    await q.close()


async def fill(url, n, remove=True):
    """Untimed: N no-op jobs on a paused queue (the workers get ready before the resume)."""
    q = Queue(QUEUE, conn(url))
    await q.pause()
    jobs = [{"name": "job", "data": {"i": i}, "opts": {"removeOnComplete": remove}} for i in range(n)]
    for chunk in common.chunks(jobs, CHUNK):
        await q.addBulk(chunk)
    await q.close()


async def seq_add(args):
    await warm(args.url)
    q = Queue(QUEUE, conn(args.url))
    t0 = time.perf_counter()
    for i in range(args.n):
        await q.add("job", {"i": i}, {"removeOnComplete": True})
    dt = time.perf_counter() - t0
    await q.close()
    return common.rate(args.n, dt)


async def bulk_add(args):
    await warm(args.url)
    q = Queue(QUEUE, conn(args.url))
    jobs = [{"name": "job", "data": {"i": i}, "opts": {"removeOnComplete": True}} for i in range(args.n)]
    t0 = time.perf_counter()
    for chunk in common.chunks(jobs, CHUNK):
        await q.addBulk(chunk)
    dt = time.perf_counter() - t0
    await q.close()
    return common.rate(args.n, dt)


async def run_worker_until(args, n, concurrency):
    done = asyncio.get_running_loop().create_future()
    state = {"count": 0, "last": 0.0}

    def on_completed(job, result):
        state["count"] += 1
        state["last"] = time.perf_counter()
        if state["count"] >= n and not done.done():
            done.set_result(None)

    worker = Worker(QUEUE, processor, {"connection": args.url, "concurrency": concurrency})
    worker.on("completed", on_completed)
    try:
        await asyncio.get_running_loop().run_in_executor(None, common.wait_ready, args.url, 1)
        t0 = time.perf_counter()
        await resume(args.url)
        await asyncio.wait_for(done, args.timeout)
    finally:
        await worker.close()
    return common.rate(state["count"], state["last"] - t0, concurrency=concurrency)


async def resume(url):
    q = Queue(QUEUE, conn(url))
    await q.resume()
    await q.close()


async def process(args):
    await fill(args.url, args.n)
    return await run_worker_until(args, args.n, args.concurrency)


async def child(args):
    rep = common.ChildReporter(args.url, args.child)
    loop = asyncio.get_running_loop()
    worker = Worker(QUEUE, processor, {"connection": args.url, "concurrency": args.concurrency})
    worker.on("completed", rep.completed)
    rep.ready()
    await loop.run_in_executor(None, rep.wait_stop, args.timeout)
    await worker.close()
    rep.finish()
    return {"count": rep.count}


async def rr(args):
    await warm(args.url)
    q = Queue(QUEUE, conn(args.url))
    events = QueueEvents(QUEUE, conn(args.url))
    worker = Worker(QUEUE, processor, {"connection": args.url, "concurrency": 16})
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, common.wait_ready, args.url, 2)  # worker, events reader
    lat = []
    try:
        t0 = time.perf_counter()
        for i in range(args.n):
            jid = f"rr-{i}"
            fut = loop.create_future()

            def settle(*a, fut=fut):
                if not fut.done():
                    fut.set_result(None)
            events.on(f"completed:{jid}", settle)
            s = time.perf_counter()
            await q.add("job", {"i": i}, {"jobId": jid, "removeOnComplete": False})
            await asyncio.wait_for(fut, 10)
            lat.append(time.perf_counter() - s)
            events.off(f"completed:{jid}", settle)
        total = time.perf_counter() - t0
    finally:
        await worker.close()
        await events.close()
        await q.close()
    return common.latency_result(lat, total)


async def memory(args):
    await fill(args.url, args.n, remove=False)
    await run_worker_until(args, args.n, 16)
    r = common.client(args.url)
    try:
        ids = [m.decode() for m in r.zrange(f"bull:{QUEUE}:completed", 0, 199)]
        job_keys = {jid: common.bull_job_keys(QUEUE, jid) for jid in ids}
        return common.memory_result(r, job_keys, [f"bull:{QUEUE}:completed"], args.n)
    finally:
        r.close()


CASES = {"seq_add": seq_add, "bulk_add": bulk_add, "process": process,
         "child": child, "rr": rr, "memory": memory}


def main():
    args = common.parse_args()
    if args.case == "multi":
        result = common.run_multi(args, "bench.peers.bullmq_py",
                                  lambda n: asyncio.run(fill(args.url, n)),
                                  lambda: asyncio.run(resume(args.url)))
    else:
        result = asyncio.run(CASES[args.case](args))
    common.emit(result)


if __name__ == "__main__":
    main()
