"""``orijs-sync``: inspect queues and jobs, act on them, run workers and OriJS providers.

    orijs-sync --url redis://127.0.0.1:6379/0 counts emails
    orijs-sync job emails 42
    orijs-sync jobs emails --state failed --limit 20
    orijs-sync worker emails myapp.tasks:send_email --concurrency 16
    orijs-sync worker myapp.tasks                      (every queue of its @tasks.task functions)
    orijs-sync worker -Q emails=myapp.mail:send -Q images=myapp.images:ROUTES
    orijs-sync worker emails myapp.tasks:resize --processes 4 --job-timeout 300
    orijs-sync events myapp.events:provider --shutdown-timeout 30
    orijs-sync workflows myapp.flows:make_provider
    orijs-sync queues --watch 2
    orijs-sync retry emails --all-failed
    orijs-sync clean emails --state completed --grace 3600

Exit status: 0 done (or stopped by a signal), 1 not found (a job, a queue) or an
unexpected error, 2 usage error or refused, 3 Redis not reachable.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import traceback
from typing import Any, Dict, Optional, Sequence

from .. import __version__, errors
from ..queue import Queue
from . import actions, dashboard_cmd
from .logs import iso_time
from .providers_cmd import add_provider_commands
from .worker_cmd import (
    WORKER_DESCRIPTION,
    WORKER_HELP,
    WORKER_USAGE,
    RedisUnreachable,
    add_worker_arguments,
    run_worker,
)

__all__ = ["EXIT_NOT_FOUND", "EXIT_UNREACHABLE", "EXIT_USAGE", "USAGE_ERRORS",
           "WORKER_HELP", "add_connection_arguments", "add_worker_arguments", "build_parser",
           "main", "run_worker"]

DEFAULT_URL = "redis://127.0.0.1:6379/0"
DEFAULT_PREFIX = "bull"
EXIT_NOT_FOUND, EXIT_USAGE, EXIT_UNREACHABLE = 1, 2, 3
# What a command reports as a usage error (exit status 2, no traceback): bad options, a
# handler that cannot be imported, a library error.
USAGE_ERRORS = (errors.OrijsError, ValueError, ImportError, AttributeError)
TIMESTAMPS = ("timestamp", "processedOn", "finishedOn")


class NotFound(errors.OrijsError):
    """A queue or job a reading command was asked about does not exist (exit status 1)."""


def plain(text: str) -> str:
    """reST markup out of a docstring shown by ``--help``: ``x`` and :role:`x` -> x."""
    return re.sub(r":[a-z:]+:`([^`]*)`", r"\1", text.replace("``", ""))


def _date(ms: Any) -> Any:
    return iso_time(int(ms) / 1000.0) if ms else ms


def _counts(args: argparse.Namespace, queue: Queue) -> int:
    counts: Dict[str, Any] = dict(queue.get_job_counts())
    if args.with_state:
        counts["is_paused"] = queue.is_paused()   # beside the "paused" count, not over it
    actions.emit(args, counts, " ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


def _job(args: argparse.Namespace, queue: Queue) -> int:
    job = queue.get_job(args.job_id)
    if job is None:
        raise NotFound(f"no job {args.job_id} in queue {queue.name}")
    fields = {**job.to_dict(), "state": job.get_state()}
    human = {k: _date(v) if k in TIMESTAMPS else v for k, v in fields.items()}
    actions.emit(args, fields, "\n".join(
        f"{k}: {v if isinstance(v, str) or v is None else json.dumps(v, default=str)}"
        for k, v in human.items()))
    return 0


def _jobs(args: argparse.Namespace, queue: Queue) -> int:
    jobs = queue.get_jobs([args.state], 0, args.limit - 1)
    rows = [{"id": j.id, "name": j.name, "attemptsMade": j.attempts_made,
             "failedReason": j.failed_reason, "timestamp": j.timestamp,
             "processedOn": j.processed_on, "finishedOn": j.finished_on} for j in jobs]
    actions.emit(args, rows, "\n".join(
        f"{r['id']} {r['name']} added {_date(r['timestamp'])} finished "
        f"{_date(r['finishedOn']) or '-'} attempts {r['attemptsMade']}"
        + (f": {r['failedReason']}" if r["failedReason"] else "") for r in rows)
        or f"no {args.state} jobs in {queue.name}")
    return 0


def _worker(args: argparse.Namespace, queue: Optional[Queue]) -> int:
    return run_worker(args, args.url, args.prefix)


def add_connection_arguments(parser: argparse.ArgumentParser, url: Optional[str],
                             prefix: Optional[str], url_default_text: str) -> None:
    """``--url`` and ``--prefix`` (their defaults: the environment here, Django's
    settings in ``manage.py orijs_worker``; None is resolved later)."""
    parser.add_argument("--url", default=url, help=f"Redis URL (default: {url_default_text})")
    parser.add_argument("--prefix", default=prefix,
                        help=f"key prefix (default: {prefix or DEFAULT_PREFIX})")


def _reading(sub: Any, name: str, help_text: str, run: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("queue")
    p.set_defaults(run=run, must_exist="read")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orijs-sync", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"orijs-sync {__version__}")
    add_connection_arguments(parser, None, None, f"$REDIS_URL, else {DEFAULT_URL}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = _reading(sub, "counts", "job counts per state", _counts)
    p.add_argument("--with-state", action="store_true", help="also say whether it is paused")
    p = _reading(sub, "job", "one job's fields and state", _job)
    p.add_argument("job_id")
    p = _reading(sub, "jobs", "jobs in one state", _jobs)
    p.add_argument("--state", default="failed")
    p.add_argument("--limit", type=int, default=20)
    p = sub.add_parser("worker", help=WORKER_HELP, description=WORKER_DESCRIPTION,
                       usage=WORKER_USAGE, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_worker_arguments(p)
    p.set_defaults(run=_worker, queue=None)
    actions.add_commands(parser, sub)
    add_provider_commands(sub)
    dashboard_cmd.add_command(sub)
    return parser


def _run(args: argparse.Namespace) -> int:
    if not getattr(args, "provider_command", False):
        args.url = args.url or os.environ.get("REDIS_URL") or DEFAULT_URL
        args.prefix = args.prefix or DEFAULT_PREFIX
    if args.queue is None:     # commands about every queue, or none
        return int(args.run(args, None))
    with Queue(args.queue, connection=args.url, prefix=args.prefix) as queue:
        if getattr(args, "must_exist", None) and not actions.queue_exists(queue):
            message = actions.missing_queue(queue)
            raise NotFound(message) if args.must_exist == "read" else \
                errors.InvalidArgument(message)
        return int(args.run(args, queue))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line's exit status: 0 done, 1 not found or an unexpected error (with
    its traceback), 2 a usage error or a refusal, 3 Redis not reachable."""
    args = build_parser().parse_args(argv)     # a bad option: exits with status 2
    try:
        return _run(args)
    except NotFound as exc:
        print(f"orijs-sync: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except (RedisUnreachable, errors.ConnectionError) as exc:
        print(f"orijs-sync: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except USAGE_ERRORS as exc:
        print(f"orijs-sync: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception:  # noqa: BLE001 - any other error: a crash, with its traceback
        logging.getLogger("orijs_sync.cli").critical("orijs-sync: unexpected error")
        traceback.print_exc()
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
