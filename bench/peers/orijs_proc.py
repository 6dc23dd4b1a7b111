"""orijs_sync's process mode: ``Worker(queue, "bench.peers.cpu_tasks:cpu_job",
processes=N, concurrency=N)``, each job's handler in one of N child processes (started by
a fork server). The ``orijs`` peer's ``proc`` case runs the same steps with the handler
on the worker's threads (``concurrency=N``), the baseline process mode is judged against.

Case ``proc`` only (bench/peers/common.py). Steps: the worker is started on the empty
queue and runs ``2 x procs`` warm-up jobs (its children up, the handler imported); the
queue is paused and filled (untimed); once the worker is blocked in Redis waiting for
work, the clock starts at the resume and stops at the last completion. The children's
memory is sampled from the resume on (bench/peers/childmem.py).
"""
from __future__ import annotations

import time

from orijs_sync import Queue, Worker

from bench.peers import childmem, common, cpu_tasks
from bench.peers import orijs as orijs_peer
from bench.peers.common import QUEUE

IMPORT_NAMES = {"cpu": "bench.peers.cpu_tasks:cpu_job", "noop": "bench.peers.cpu_tasks:noop"}
FUNCTIONS = {"cpu": cpu_tasks.cpu_job, "noop": cpu_tasks.noop}


def make_worker(args, processes: int) -> Worker:
    """``processes`` 0: the handler on the worker's threads. A tree whose Worker has no
    ``processes=`` raises TypeError here, and the cell reports it."""
    if processes:
        return Worker(QUEUE, IMPORT_NAMES[args.handler], connection=args.url,
                      processes=processes, concurrency=args.concurrency)
    return Worker(QUEUE, FUNCTIONS[args.handler], connection=args.url,
                  concurrency=args.concurrency)


def warm_up(args, worker: Worker, count: int) -> None:
    done = common.Completions(count)
    worker.on("completed", done)
    q = Queue(QUEUE, connection=args.url)
    try:
        q.add_bulk([{"name": "warm", "data": {"i": i}, "opts": {"remove_on_complete": True}}
                    for i in range(count)])
    finally:
        q.close()
    if not done.wait(120):
        raise RuntimeError(f"warm-up timed out at {done.count}/{count}")


def timed(args, worker: Worker, sample_children: bool) -> dict:
    orijs_peer.fill(args.url, args.n)          # pauses the queue, then adds (untimed)
    completions = common.Completions(args.n)
    worker.on("completed", completions)
    common.wait_ready(args.url, 1)
    memory = childmem.ChildMemory(childmem.own_grandchildren).start() if sample_children else None
    t0 = time.perf_counter()
    orijs_peer.resume(args.url)
    if not completions.wait(args.timeout):
        raise RuntimeError(f"timed out at {completions.count}/{args.n}")
    fields = memory.stop() if memory else {}
    return common.rate(completions.count, completions.last - t0, **fields)


def run(args, processes: int) -> dict:
    """The proc case, with the handler in ``processes`` children (0: on threads)."""
    job_ms = cpu_tasks.job_ms() if args.handler == "cpu" else None
    worker = make_worker(args, processes)
    worker.start()
    try:
        warm_up(args, worker, 2 * max(processes, args.concurrency))
        result = timed(args, worker, sample_children=bool(processes))
    finally:
        worker.close(timeout=30)
    result.update(handler=args.handler, processes=processes, concurrency=args.concurrency,
                  job_ms=job_ms)
    return result


def main() -> None:
    args = common.parse_args()
    if args.case != "proc":
        common.emit(common.unsupported("orijs_sync processes: the proc case only"))
        return
    common.emit(run(args, args.procs))


if __name__ == "__main__":     # required: the children import this module as __mp_main__
    main()
