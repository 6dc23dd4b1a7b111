"""Celery with its prefork pool: one worker process (``celery worker --pool=prefork
--concurrency=N``, started here as ``app.worker_main``), Redis as the broker, results
disabled (no result backend, ``task_ignore_result``). The proc case only.

The tasks are put on the queue (a Redis list under the queue's name) and the list is
held aside until the worker is ready (blocked in BRPOP), as for RQ and Huey. The worker
process is a child of this one (``common.run_multi`` with one child); its pool's
children, this process's grandchildren, run the tasks and are sampled for memory.
Completions are counted where Celery's ``task_success`` signal fires, in the pool child
that ran the task, into shared memory the worker process made before its pool forked.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

from celery import Celery, signals

from bench.peers import childmem, common, cpu_tasks
from bench.peers.common import QUEUE

TASKS = {"cpu": cpu_tasks.cpu_job, "noop": cpu_tasks.noop}


def make_app(url: str) -> Celery:
    app = Celery("bench", broker=url, set_as_current=True)
    app.conf.update(task_default_queue=QUEUE, task_ignore_result=True, result_backend=None,
                    worker_enable_remote_control=False, worker_send_task_events=False,
                    broker_connection_retry_on_startup=True, worker_hijack_root_logger=False)
    for name, fn in TASKS.items():
        app.task(name=name)(fn)
    return app


def fill(app: Celery, name: str, n: int) -> None:
    """Untimed: n messages on the queue's list (one LPUSH each, through Celery)."""
    task = app.tasks[name]
    with app.producer_or_acquire() as producer:
        for i in range(n):
            task.apply_async((i,), producer=producer)


class SharedReporter(common.ChildReporter):
    """Publishes the shared counter's figures (the pool children count into it)."""

    def __init__(self, url: str, child: int, counter: common.SharedCounter) -> None:
        super().__init__(url, child)
        self.counter = counter

    def publish(self) -> None:
        self.count, self.last = self.counter.read()
        super().publish()


def stop_when_told(rep: common.ChildReporter, timeout: float) -> None:
    """The parent's stop -> a warm shutdown (SIGTERM, as a process manager would send)."""
    rep.wait_stop(timeout)
    os.kill(os.getpid(), signal.SIGTERM)


def worker_child(args: argparse.Namespace) -> dict:
    """The worker process: ``--concurrency`` pool children running ``--handler``."""
    app = make_app(args.url)
    counter = common.SharedCounter()          # before the pool forks
    rep = SharedReporter(args.url, args.child, counter)
    signals.task_success.connect(counter, weak=False)
    signals.worker_ready.connect(lambda **_: rep.ready(), weak=False)
    threading.Thread(target=stop_when_told, args=(rep, args.timeout), daemon=True).start()
    try:
        app.worker_main(["worker", "--pool=prefork", f"--concurrency={args.concurrency}",
                         "--loglevel=WARNING", "--without-gossip", "--without-mingle",
                         "--without-heartbeat", "-Q", QUEUE])
    except SystemExit:
        pass
    rep.finish()
    return {"count": rep.count}


def proc(args: argparse.Namespace) -> dict:
    app = make_app(args.url)
    job_ms = cpu_tasks.job_ms() if args.handler == "cpu" else None

    def fill_held(n: int) -> None:
        fill(app, args.handler, n)
        common.hold(args.url, QUEUE)
    one_worker = argparse.Namespace(**{**vars(args), "procs": 1})
    memory = childmem.ChildMemory(childmem.own_grandchildren).start()
    result = common.run_multi(one_worker, "bench.peers.celery_peer", fill_held,
                              lambda: common.release(args.url, QUEUE),
                              child_case="worker_child", child_args=["--handler", args.handler])
    result.update(memory.stop())
    del result["procs"]
    result.update(handler=args.handler, processes=args.concurrency, job_ms=job_ms,
                  worker_processes=1, results="disabled")
    return result


def main() -> None:
    logging.getLogger("celery").setLevel(logging.WARNING)
    args = common.parse_args()
    if args.case == "proc":
        result = proc(args)
    elif args.case == "worker_child":
        result = worker_child(args)
    else:
        result = common.unsupported("Celery: the proc case only")
    common.emit(result)


if __name__ == "__main__":
    main()
