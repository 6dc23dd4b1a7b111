"""``orijs-sync``: inspect queues and jobs, run a worker from ``module:function``.

    orijs-sync --url redis://127.0.0.1:6379/0 counts emails
    orijs-sync job emails 42
    orijs-sync jobs emails --state failed --limit 20
    orijs-sync worker emails myapp.tasks:send_email --concurrency 16
    orijs-sync worker emails myapp.tasks:resize --processes 4 --job-timeout 300
    orijs-sync worker emails myapp.tasks:send_email --connect-timeout 120   (waits for Redis)
    orijs-sync queues --watch 2
    orijs-sync retry emails --all-failed
    orijs-sync clean emails --state completed --grace 3600
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Dict, Optional, Sequence

from .. import errors
from ..queue import Queue
from ..worker import Worker
from . import actions


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def _counts(args: argparse.Namespace, queue: Queue) -> int:
    counts: Dict[str, Any] = dict(queue.get_job_counts())
    if args.with_state:
        counts["is_paused"] = queue.is_paused()   # beside the "paused" count, not over it
    _print(counts)
    return 0


def _job(args: argparse.Namespace, queue: Queue) -> int:
    job = queue.get_job(args.job_id)
    if job is None:
        print(f"no job {args.job_id} in queue {queue.name}", file=sys.stderr)
        return 1
    _print({**job.to_dict(), "state": job.get_state()})
    return 0


def _jobs(args: argparse.Namespace, queue: Queue) -> int:
    jobs = queue.get_jobs([args.state], 0, args.limit - 1)
    _print([{"id": j.id, "name": j.name, "attemptsMade": j.attempts_made,
             "failedReason": j.failed_reason} for j in jobs])
    return 0


def _worker(args: argparse.Namespace, queue: Queue) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # the handler by its import name: Worker imports it (checked now), and in process
    # mode each child process imports it by that name
    worker = Worker(queue.name, args.handler, connection=args.url, prefix=args.prefix,
                    concurrency=args.concurrency, worker_name=args.name,
                    max_reconnect_delay=args.max_reconnect_delay, processes=args.processes,
                    job_timeout=args.job_timeout,
                    max_jobs_per_process=args.max_jobs_per_process)
    actions.log_each_job(worker)
    worker.run(connect_timeout=args.connect_timeout)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orijs-sync", description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
                        help="Redis URL (default: $REDIS_URL or localhost)")
    parser.add_argument("--prefix", default="bull", help="key prefix (default: bull)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("counts", help="job counts per state")
    p.add_argument("queue")
    p.add_argument("--with-state", action="store_true", help="also say whether it is paused")
    p.set_defaults(run=_counts)
    p = sub.add_parser("job", help="one job's fields and state")
    p.add_argument("queue")
    p.add_argument("job_id")
    p.set_defaults(run=_job)
    p = sub.add_parser("jobs", help="jobs in one state")
    p.add_argument("queue")
    p.add_argument("--state", default="failed")
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(run=_jobs)
    p = sub.add_parser("worker", help="process a queue with module:function until SIGINT/SIGTERM")
    p.add_argument("queue")
    p.add_argument("handler", help="module:function taking a Job")
    p.add_argument("--concurrency", type=int, default=None,
                   help="jobs at once (default: 1; with --processes, as many as processes)")
    p.add_argument("--processes", type=int, default=None, metavar="N",
                   help="run each job's handler in one of N child processes (for CPU-bound "
                        "handlers; default: on the worker's threads)")
    p.add_argument("--job-timeout", type=float, default=None, metavar="SECONDS",
                   help="with --processes: kill a handler's child process after this long "
                        "(a failed attempt)")
    p.add_argument("--max-jobs-per-process", type=int, default=None, metavar="N",
                   help="with --processes: replace a child process after N jobs")
    p.add_argument("--connect-timeout", type=float, default=None, metavar="SECONDS",
                   help="give up if Redis does not answer within this time (default: wait "
                        "until SIGINT/SIGTERM)")
    p.add_argument("--max-reconnect-delay", type=float, default=5.0, metavar="SECONDS",
                   help="longest pause between tries while Redis is down (default: 5)")
    p.add_argument("--name", help="worker name (listed by getWorkers() as :w:NAME)")
    p.set_defaults(run=_worker)
    actions.add_commands(parser, sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.queue is None:     # commands about every queue
            return int(args.run(args, None))
        with Queue(args.queue, connection=args.url, prefix=args.prefix) as queue:
            if getattr(args, "must_exist", False):
                actions.require_queue(queue)
            return int(args.run(args, queue))
    except (errors.OrijsError, ValueError, ImportError, AttributeError) as exc:
        print(f"orijs-sync: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
