"""The ``orijs-sync`` commands that list queues and act on them (``main.py`` wires them in).

Actions (retry, remove, promote, clean, pause, resume, drain, obliterate,
schedulers) refuse a queue that does not exist under the prefix, with a message
saying so, before they write anything (``main.py`` checks, by ``queue_exists``).
``--json`` prints JSON for scripts.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any, Dict, List, Optional, Sequence

from .. import errors
from ..job import Job
from ..queue import Queue
from ..store.connection import RedisConnection

# Keys a queue with jobs, or a past, has: how `queues` finds them and actions check them.
QUEUE_SUFFIXES = ("meta", "id", "wait", "active", "paused", "prioritized", "delayed",
                  "completed", "failed", "waiting-children", "events", "repeat")
RETRY_BATCH = 1000
DRAINED = ("waiting", "prioritized", "paused")     # what drain removes (and delayed)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """``data`` as JSON with ``--json``, else the human ``text``."""
    print(json.dumps(data, sort_keys=True, default=str) if args.json else text)


def queue_exists(queue: Queue) -> bool:
    return bool(queue.client.exists(*(queue.keys.key(s) for s in QUEUE_SUFFIXES)))


def missing_queue(queue: Queue) -> str:
    return (f"queue {queue.name!r} does not exist under prefix {queue.prefix!r} "
            f"(no key {queue.keys.base}meta, id, wait, ...): nothing done")


def find_queues(client: Any, prefix: str) -> List[str]:
    """Every queue under ``prefix``, found by scanning its keys."""
    found = set()
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        rest = key[len(prefix) + 1:]
        name, sep, suffix = rest.rpartition(":")
        if sep and name and ":" not in name and suffix in QUEUE_SUFFIXES:
            found.add(name)
    return sorted(found)


def _counts_line(name: str, counts: Dict[str, Any]) -> str:
    return f"{name}: " + " ".join(f"{k}={v}" for k, v in counts.items())


def _queues_once(args: argparse.Namespace, connection: RedisConnection) -> None:
    table = {}
    for name in find_queues(connection.client, args.prefix):
        with Queue(name, connection, prefix=args.prefix) as queue:
            table[name] = {**queue.get_job_counts(), "is_paused": queue.is_paused()}
    text = "\n".join(_counts_line(n, c) for n, c in table.items()) or \
        f"no queues under prefix {args.prefix!r}"
    emit(args, table, text)
    sys.stdout.flush()


def run_queues(args: argparse.Namespace, _queue: Optional[Queue]) -> int:
    """``queues [--watch N]``: every queue with its counts (refreshed every N seconds
    until SIGINT/SIGTERM with ``--watch``)."""
    stop = threading.Event()
    if args.watch is not None:
        if args.watch <= 0:
            raise errors.InvalidArgument(f"--watch must be a positive number of seconds, "
                                         f"got {args.watch}")
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    connection = RedisConnection(args.url)
    try:
        _queues_once(args, connection)
        while args.watch is not None and not stop.wait(args.watch):
            _queues_once(args, connection)
    finally:
        connection.close()
    return 0


def _job_or_fail(queue: Queue, job_id: str) -> Job:
    job = queue.get_job(job_id)
    if job is None:
        raise errors.JobNotFound(f"no job {job_id} in queue {queue.name}")
    return job


def _job_in(queue: Queue, job_id: str, states: Sequence[str], wanted: str,
            refused: str) -> Job:
    """The job, if it is in one of ``states``; else refused naming the state it is in
    ("job 7 is active, not failed: not retried")."""
    job = _job_or_fail(queue, job_id)
    state = job.get_state()
    if state not in states:
        raise errors.InvalidStateError(f"job {job_id} is {state}, not {wanted}: {refused}")
    return job


def run_retry(args: argparse.Namespace, queue: Queue) -> int:
    if bool(args.job_id) == bool(args.all_failed):
        raise errors.InvalidArgument("retry takes one job id or --all-failed")
    if args.job_id:
        _job_in(queue, args.job_id, ("failed",), "failed", "not retried").retry()
        emit(args, {"retried": [args.job_id]}, f"job {args.job_id} moved back to wait")
        return 0
    retried: List[str] = []
    while True:
        batch = queue.get_jobs("failed", 0, RETRY_BATCH - 1)
        if not batch:
            break
        for job in batch:
            job.retry()
            retried.append(job.id)
    emit(args, {"retried": retried}, f"{len(retried)} failed job(s) moved back to wait")
    return 0


def run_remove(args: argparse.Namespace, queue: Queue) -> int:
    job = _job_or_fail(queue, args.job_id)
    if not queue.remove(args.job_id):
        raise errors.InvalidStateError(f"job {args.job_id} is {job.get_state()} and locked "
                                       f"by a worker: not removed")
    emit(args, {"removed": args.job_id}, f"job {args.job_id} removed")
    return 0


def run_promote(args: argparse.Namespace, queue: Queue) -> int:
    _job_in(queue, args.job_id, ("delayed",), "delayed", "not promoted").promote()
    emit(args, {"promoted": args.job_id}, f"job {args.job_id} promoted to wait")
    return 0


def run_clean(args: argparse.Namespace, queue: Queue) -> int:
    removed = queue.clean(args.grace, limit=args.limit, state=args.state)
    emit(args, {"removed": removed},
         f"{len(removed)} {args.state} job(s) older than {args.grace} s removed")
    return 0


def run_pause(args: argparse.Namespace, queue: Queue) -> int:
    queue.pause()
    emit(args, {"paused": True}, f"queue {queue.name} paused")
    return 0


def run_resume(args: argparse.Namespace, queue: Queue) -> int:
    queue.resume()
    emit(args, {"paused": False}, f"queue {queue.name} resumed")
    return 0


def run_drain(args: argparse.Namespace, queue: Queue) -> int:
    states = DRAINED + (("delayed",) if args.delayed else ())
    before = queue.get_job_counts(*states)     # the breakdown, counted just before
    removed = queue.drain(delayed=args.delayed)
    emit(args, {"removed": removed, "by_state": before},
         f"{removed} job(s) removed from {queue.name} ("
         + ", ".join(f"{n} {state}" for state, n in before.items()) + ", counted just before)")
    return 0


def run_obliterate(args: argparse.Namespace, queue: Queue) -> int:
    if not args.force:
        raise errors.InvalidArgument(f"obliterate deletes queue {queue.name} and every job "
                                     f"of it, active ones too: pass --force to do it")
    queue.obliterate(force=True)
    emit(args, {"obliterated": queue.name}, f"queue {queue.name} obliterated")
    return 0


def run_schedulers(args: argparse.Namespace, queue: Queue) -> int:
    if args.remove:
        if not queue.remove_job_scheduler(args.remove):
            raise errors.InvalidArgument(f"no job scheduler {args.remove!r} in {queue.name}")
        emit(args, {"removed": args.remove}, f"job scheduler {args.remove} removed")
        return 0
    rows = [{"id": s.id, "name": s.name, "next": s.next, "every": s.every,
             "pattern": s.pattern} for s in queue.get_job_schedulers(asc=True)]
    emit(args, rows, "\n".join(f"{r['id']}: job {r['name']!r} next at {r['next']} ms, "
                               f"every={r['every']} pattern={r['pattern']}" for r in rows)
         or f"no job schedulers in {queue.name}")
    return 0


def _action(sub: Any, name: str, help_text: str, run: Any, job_id: bool = False) -> Any:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("queue")
    if job_id:
        p.add_argument("job_id")
    p.set_defaults(run=run, must_exist=True)
    return p


def add_commands(parser: argparse.ArgumentParser, sub: Any) -> None:
    parser.add_argument("--json", action="store_true", help="JSON output, for scripts")
    p = sub.add_parser("queues", help="every queue under the prefix with its counts",
                       description="every queue under the prefix with its counts")
    p.add_argument("--watch", type=float, metavar="N", help="refresh every N seconds")
    p.set_defaults(run=run_queues, queue=None)
    p = _action(sub, "retry", "move a failed job (or all of them) back to wait", run_retry)
    p.add_argument("job_id", nargs="?")
    p.add_argument("--all-failed", action="store_true")
    _action(sub, "remove", "remove a job (not one a worker holds)", run_remove, True)
    _action(sub, "promote", "run a delayed job now", run_promote, True)
    p = _action(sub, "clean", "remove old jobs of one state", run_clean)
    p.add_argument("--state", default="completed")
    p.add_argument("--grace", type=float, required=True, metavar="SECONDS")
    p.add_argument("--limit", type=int, default=0, help="at most this many (0: all)")
    _action(sub, "pause", "pause the queue for every worker", run_pause)
    _action(sub, "resume", "resume a paused queue", run_resume)
    p = _action(sub, "drain", "remove the waiting jobs", run_drain)
    p.add_argument("--delayed", action="store_true", help="the delayed ones too")
    p = _action(sub, "obliterate", "delete the queue and all its jobs", run_obliterate)
    p.add_argument("--force", action="store_true", help="required: this deletes everything")
    p = _action(sub, "schedulers", "list the job schedulers (or remove one)", run_schedulers)
    p.add_argument("--remove", metavar="ID", help="remove this scheduler")
    for command in sub.choices.values():   # the common options after the command too
        command.add_argument("--url", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        command.add_argument("--prefix", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        command.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                             help=argparse.SUPPRESS)
