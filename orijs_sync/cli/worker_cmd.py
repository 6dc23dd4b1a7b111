"""The ``worker`` command (shared with Django's ``manage.py orijs_worker``): what to
run (``QUEUE HANDLER``, a module of ``@tasks.task`` functions, ``--queue QUEUE=HANDLER``),
the start-up banner, each job's log line, and the run until a warm or cold shutdown.

A HANDLER is ``module:function``, ``module:MAPPING`` (a ``{job name: function}`` dict)
or a module whose ``@tasks.task`` functions are served, each on its queue.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import __version__, errors
from ..base import roles
from ..base import validate as check
from ..base.pools import deadline_of, remaining
from ..engine.job_log import job_extra
from ..engine.routing import as_processor
from ..tasks import Task
from ..worker import Worker
from ..worker_group import WorkerGroup
from .logs import add_logging_arguments, mask_url, setup_logging
from .shutdown import Signals, exit_now, stop_warm_then_cold, wait_for_signal

log = logging.getLogger("orijs_sync.cli")

WORKER_HELP = "run handlers on one or more queues until SIGINT/SIGTERM"
WORKER_USAGE = ("%(prog)s QUEUE HANDLER [options]\n       %(prog)s MODULE [options]\n"
                "       %(prog)s -Q QUEUE=HANDLER [-Q QUEUE=HANDLER ...] [options]")
WORKER_DESCRIPTION = """\
Run handlers on one or more queues until SIGINT/SIGTERM.

HANDLER is module:function, module:MAPPING (a dict {job name: function}), or a
module whose @tasks.task functions are served. A MODULE alone serves every queue
its tasks declare; QUEUE MODULE serves that queue's tasks. Several queues run in
one process on one engine. The current folder is on the import path.

  orijs-sync worker emails myapp.mail:send --concurrency 8
  orijs-sync worker myapp.tasks
  orijs-sync worker -Q emails=myapp.mail:send -Q images=myapp.images:ROUTES

The first SIGTERM/SIGINT stops taking jobs and lets the running ones finish (up
to --shutdown-timeout); a second signal, or that timeout, moves them back to
wait and exits. Exit status: 0 stopped, 2 usage error, 3 Redis not reachable
within --connect-timeout, 1 unexpected error."""
HANDLER_FORMS = ("a handler is module:function, module:MAPPING (a {job name: function} "
                 "dict) or a module of @tasks.task functions")
Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]


class RedisUnreachable(errors.ConnectionError):
    """Redis did not answer within ``--connect-timeout`` (exit status 3)."""


@dataclass
class Served:
    """One queue the command serves: its processor (what Worker takes) and, for the
    banner, what runs its jobs."""
    queue: str
    processor: Any
    what: str


def add_paths(paths: List[str]) -> None:
    """``--path`` folders first on ``sys.path``, then the current folder (as rq, celery
    and gunicorn do): a module beside the command imports without ``PYTHONPATH``."""
    for folder in ["", *reversed(paths)]:
        if folder in sys.path:
            sys.path.remove(folder)
        sys.path.insert(0, folder)


def import_module_of(module: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - a usage error, named, without a traceback
        raise errors.InvalidArgument(f"handler {spec!r}: cannot import module {module!r} "
                                     f"({type(exc).__name__}: {exc}); {HANDLER_FORMS}",
                                     "handler", spec) from exc


def _task_routes(tasks: List[Task], prefix: str, spec: str) -> Dict[str, Any]:
    routes: Dict[str, Any] = {}
    for task in tasks:
        if task.tasks.prefix != prefix:
            raise errors.InvalidArgument(
                f"handler {spec!r}: task {task.name} is declared with prefix "
                f"{task.tasks.prefix!r}, the worker runs under {prefix!r}: pass --prefix "
                f"{task.tasks.prefix}", "prefix", prefix)
        routes[task.name] = task.tasks.routes(task.queue_name)[task.name]
    return routes


def _from_tasks(queue: Optional[str], tasks: List[Task], prefix: str,
                spec: str) -> List[Served]:
    by_queue: Dict[str, List[Task]] = {}
    for task in tasks:
        if queue is None or task.queue_name == queue:
            by_queue.setdefault(task.queue_name, []).append(task)
    if not by_queue:
        where = "" if queue is None else f" of queue {queue!r}"
        raise errors.InvalidArgument(f"handler {spec!r}: no @tasks.task function{where} "
                                     f"found; {HANDLER_FORMS}", "handler", spec)
    return [Served(name, _task_routes(found, prefix, spec),
                   f"tasks {', '.join(t.name for t in found)} ({spec})")
            for name, found in sorted(by_queue.items())]


def _name_of(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn)}"


def resolve(queue: Optional[str], spec: str, prefix: str) -> List[Served]:
    """What ``spec`` runs, on ``queue`` (None: the queues its tasks declare)."""
    module_name, sep, attr = spec.partition(":")
    if not module_name or (sep and not attr):
        raise errors.InvalidArgument(f"handler {spec!r}: {HANDLER_FORMS}", "handler", spec)
    module = import_module_of(module_name, spec)
    if not sep:
        tasks = [v for v in vars(module).values() if isinstance(v, Task)]
        return _from_tasks(queue, tasks, prefix, spec)
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise errors.InvalidArgument(f"handler {spec!r}: module {module_name} has no "
                                         f"{attr}; {HANDLER_FORMS}", "handler", spec)
        target = getattr(target, part)
    if isinstance(target, Task):
        return _from_tasks(queue or target.queue_name, [target], prefix, spec)
    if queue is None:
        raise errors.InvalidArgument(f"handler {spec!r} needs a queue: worker QUEUE {spec} "
                                     f"(or --queue QUEUE={spec})", "handler", spec)
    if isinstance(target, Mapping):
        names = ", ".join(f"{name} -> {_name_of(fn)}" for name, fn in target.items())
        return [Served(queue, dict(target), f"{{{names}}} ({spec})")]
    as_processor(target)          # a function, or refused naming what it is
    return [Served(queue, spec, spec)]    # by name: a child process imports it again


def served_queues(args: argparse.Namespace, prefix: str) -> List[Served]:
    """Every queue of the command line: ``[QUEUE] HANDLER`` and each ``--queue``."""
    specs: List[tuple[Optional[str], str]] = []
    if len(args.targets) > 2:
        raise errors.InvalidArgument(
            "worker takes QUEUE HANDLER or a module of tasks; more queues with --queue "
            "QUEUE=HANDLER", "targets", args.targets)
    if args.targets:
        specs.append((args.targets[0], args.targets[1]) if len(args.targets) == 2
                     else (None, args.targets[0]))
    for item in args.queues:
        name, sep, spec = item.partition("=")
        if not sep or not name or not spec:
            raise errors.InvalidArgument(f"--queue {item!r}: must be QUEUE=HANDLER",
                                         "queue", item)
        specs.append((name, spec))
    if not specs:
        raise errors.InvalidArgument("worker: name what to run: QUEUE HANDLER, a module of "
                                     "tasks, or --queue QUEUE=HANDLER", "targets", [])
    served = [s for queue, spec in specs for s in resolve(queue, spec, prefix)]
    names = [s.queue for s in served]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise errors.InvalidArgument(f"queue {twice[0]!r} is named twice: one handler per "
                                     f"queue (a MAPPING routes several job names)",
                                     "queue", twice[0])
    return served


def wrapped(processor: Any, wrap: Optional[Wrap]) -> Any:
    if wrap is None:
        return processor
    if isinstance(processor, dict):
        return {name: wrap(as_processor(fn)) for name, fn in processor.items()}
    return wrap(as_processor(processor))


def log_each_job(worker: Worker) -> None:
    """An INFO line per completed job (failures: the library's own WARNING/ERROR)."""
    def completed(job: Any, _result: Any) -> None:
        log.info("job %s (%s) of %s completed", job.id, job.name, job.queue.name,
                 extra=job_extra(job.queue.name, job.id, job.name, job.attempts_made,
                                 worker.worker_name or worker.id))
    worker.on("completed", completed)


def log_banner(served: List[Served], args: argparse.Namespace, connection: Any,
               prefix: str) -> None:
    log.info("orijs-sync %s: worker for %d queue(s)", __version__, len(served))
    for s in served:
        log.info("queue %s: %s", s.queue, s.what)
    if args.processes is not None:
        mode = f"{args.processes} child process(es) per queue"
    else:
        mode = f"concurrency {args.concurrency or 1} per queue, on threads"
    log.info("%s; shutdown timeout %s", mode, "none" if args.shutdown_timeout is None
             else f"{args.shutdown_timeout:g} s")
    log.info("redis %s, prefix %s", mask_url(connection), prefix)


def _close_all(workers: List[Worker], group: Optional[WorkerGroup],
               timeout: Optional[float]) -> bool:
    deadline = deadline_of(timeout)
    drained = True
    for worker in workers:
        drained = worker.close(timeout=remaining(deadline)) and drained
    if group is not None:
        drained = group.close(timeout=remaining(deadline)) and drained
    return drained


def _start_all(workers: List[Worker]) -> None:
    for worker in workers:
        if not worker.is_running:
            worker.start()


def run_workers(workers: List[Worker], group: Optional[WorkerGroup],
                args: argparse.Namespace) -> bool:
    """Start (waiting for Redis up to ``--connect-timeout``), block until a signal,
    stop warm; False after a cold shutdown."""
    with Signals() as signals:
        try:
            started = roles.start_when_redis_answers(
                lambda: _start_all(workers), signals.warm, args.connect_timeout,
                args.max_reconnect_delay, "worker", workers[0].connection.address)
        except errors.TimeoutError as exc:
            _close_all(workers, group, 0)
            raise RedisUnreachable(str(exc)) from exc
        if started:
            log.info("worker started: SIGTERM or SIGINT stops it")
            wait_for_signal(signals)
        return stop_warm_then_cold(signals, lambda t: _close_all(workers, group, t),
                                   args.shutdown_timeout, lambda: _cold_stop(workers),
                                   "worker")


def _cold_stop(workers: List[Worker]) -> None:
    """Every worker's running jobs back to wait (see ``Worker._cold_stop``)."""
    lock_wait = max(w.lock_duration_ms for w in workers) / 1000.0
    for worker in workers:
        worker._cold_stop(lock_wait)


def run_worker(args: argparse.Namespace, connection: Any, prefix: str,
               wrap: Optional[Wrap] = None) -> int:
    """The ``worker`` command: ``args`` from ``add_worker_arguments``; blocks until
    SIGINT/SIGTERM. ``wrap`` (the Django command's) takes each handler and returns the
    function the Worker calls. Without ``wrap`` a ``module:function`` goes to the Worker
    by its import name (in process mode each child process imports it again)."""
    setup_logging(args.log_level, args.log_format)
    check_run_arguments(args)
    add_paths(args.path)
    if wrap is not None and args.processes is not None:
        raise errors.InvalidArgument("--processes: this command runs its handlers on threads "
                                     "(each job is wrapped in-process); use orijs-sync worker "
                                     "for child processes", "processes", args.processes)
    served = served_queues(args, prefix)
    group = WorkerGroup(connection, name=args.name or "cli") if len(served) > 1 else None
    where: Dict[str, Any] = {"group": group} if group else {"connection": connection}
    workers = [Worker(s.queue, wrapped(s.processor, wrap), prefix=prefix,
                      concurrency=args.concurrency, worker_name=args.name,
                      max_reconnect_delay=args.max_reconnect_delay, processes=args.processes,
                      job_timeout=args.job_timeout,
                      max_jobs_per_process=args.max_jobs_per_process, **where)
               for s in served]
    log_banner(served, args, connection, prefix)
    for worker in workers:
        log_each_job(worker)
    if not run_workers(workers, group, args):
        exit_now(0)
    return 0


# (flags, add_argument options) of the worker command, after its positionals
WORKER_OPTIONS: Sequence[Tuple[Tuple[str, ...], Dict[str, Any]]] = (
    (("--queue", "-Q"), dict(action="append", default=[], dest="queues",
                             metavar="QUEUE=HANDLER", help="one more queue and its handler "
                             "(repeatable); all on one engine")),
    (("--concurrency",), dict(type=int, default=None, help="jobs at once per queue "
                              "(default: 1; with --processes, as many as processes)")),
    (("--processes",), dict(type=int, default=None, metavar="N", help="run each job's "
                            "handler in one of N child processes (for CPU-bound handlers; "
                            "default: on the worker's threads)")),
    (("--job-timeout",), dict(type=float, default=None, metavar="SECONDS", help="with "
                              "--processes: kill a handler's child process after this long "
                              "(a failed attempt)")),
    (("--max-jobs-per-process",), dict(type=int, default=None, metavar="N", help="with "
                                       "--processes: replace a child process after N jobs")),
    (("--name",), dict(help="worker name (listed by getWorkers() as :w:NAME)")),
)
# the options of every long-running command (worker, events, workflows)
RUN_OPTIONS: Sequence[Tuple[Tuple[str, ...], Dict[str, Any]]] = (
    (("--path",), dict(action="append", default=[], metavar="DIR", help="a folder to "
                       "import from, before the current one (repeatable); the current "
                       "folder is always on the path")),
    (("--shutdown-timeout",), dict(type=float, default=None, metavar="SECONDS", help="after "
                                   "SIGTERM/SIGINT, let running jobs finish this long, then "
                                   "stop them (back to wait); default: no limit (a second "
                                   "signal stops them)")),
    (("--connect-timeout",), dict(type=float, default=None, metavar="SECONDS", help="exit "
                                  "with status 3 if Redis does not answer within this time "
                                  "(default: wait until SIGINT/SIGTERM)")),
    (("--max-reconnect-delay",), dict(type=float, default=5.0, metavar="SECONDS",
                                      help="longest pause between tries while Redis is "
                                      "down (default: 5)")),
)


def add_worker_arguments(p: argparse.ArgumentParser) -> None:
    """The ``worker`` command's arguments (what to run and the options)."""
    p.add_argument("targets", nargs="*", metavar="[QUEUE] HANDLER",
                   help="QUEUE and its handler (module:function or module:MAPPING), or a "
                        "module of @tasks.task functions (every queue they declare; with "
                        "QUEUE, that queue's)")
    for flags, options in WORKER_OPTIONS:
        p.add_argument(*flags, **options)
    add_run_arguments(p)


def check_run_arguments(args: argparse.Namespace) -> None:
    """The long-running commands' durations, refused before anything starts."""
    check.seconds(args.shutdown_timeout, "shutdown_timeout")
    check.seconds(args.connect_timeout, "connect_timeout")
    check.seconds(args.max_reconnect_delay, "max_reconnect_delay", allow_none=False)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    for flags, options in RUN_OPTIONS:
        p.add_argument(*flags, **options)
    add_logging_arguments(p)
