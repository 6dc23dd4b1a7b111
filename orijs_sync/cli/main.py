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
from typing import Any, Callable, Dict, Optional, Sequence

from .. import errors
from ..engine.routing import as_processor
from ..queue import Queue
from ..worker import Worker
from . import actions, dashboard_cmd

WORKER_HELP = "process a queue with module:function until SIGINT/SIGTERM"
# What a command reports as a usage error (exit status 2, no traceback): bad options, a
# handler that cannot be imported, a library error.
USAGE_ERRORS = (errors.OrijsError, ValueError, ImportError, AttributeError)


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


def run_worker(args: argparse.Namespace, connection: Any, prefix: str,
               wrap: Optional[Callable[[Callable[..., Any]], Callable[..., Any]]] = None) -> int:
    """The ``worker`` command: ``args`` from ``add_worker_arguments``; blocks until
    SIGINT/SIGTERM. ``wrap`` (the Django command's) takes the handler and returns the
    function the Worker calls. Shared by ``orijs-sync worker`` and ``manage.py orijs_worker``.
    Without ``wrap`` the handler goes to the Worker by its import name: it imports it
    (checked now), and in process mode each child process imports it by that name."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if wrap is not None and args.processes is not None:
        raise errors.InvalidArgument("--processes: this command runs its handlers on threads "
                                     "(each job is wrapped in-process); use orijs-sync worker "
                                     "for child processes", "processes", args.processes)
    handler: Any = args.handler if wrap is None else wrap(as_processor(args.handler))
    worker = Worker(args.queue, handler, connection=connection, prefix=prefix,
                    concurrency=args.concurrency, worker_name=args.name,
                    max_reconnect_delay=args.max_reconnect_delay, processes=args.processes,
                    job_timeout=args.job_timeout,
                    max_jobs_per_process=args.max_jobs_per_process)
    actions.log_each_job(worker)
    worker.run(connect_timeout=args.connect_timeout)
    return 0


def _worker(args: argparse.Namespace, queue: Queue) -> int:
    return run_worker(args, args.url, args.prefix)


def add_worker_arguments(p: argparse.ArgumentParser) -> None:
    """The ``worker`` command's arguments (the queue, the handler and the options)."""
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


def add_connection_arguments(parser: argparse.ArgumentParser, url: Optional[str],
                             prefix: Optional[str], url_default_text: str) -> None:
    """``--url`` and ``--prefix`` (the defaults differ: the environment here, Django's
    settings in ``manage.py orijs_worker``)."""
    parser.add_argument("--url", default=url, help=f"Redis URL (default: {url_default_text})")
    parser.add_argument("--prefix", default=prefix,
                        help=f"key prefix (default: {prefix or 'from the settings'})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orijs-sync", description=__doc__.splitlines()[0])
    add_connection_arguments(parser, os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
                             "bull", "$REDIS_URL or localhost")
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
    p = sub.add_parser("worker", help=WORKER_HELP)
    add_worker_arguments(p)
    p.set_defaults(run=_worker)
    actions.add_commands(parser, sub)
    dashboard_cmd.add_command(sub)
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
    except USAGE_ERRORS as exc:
        print(f"orijs-sync: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
