"""A GroupWorker's process mode (``processes=``): its options, checked as a Worker's
(``orijs_sync._processes``), how a group job crosses to a child process and back
(``engine.children`` runs the children), and how a job whose child was stopped as the
worker closed goes back to its place in its group."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, cast

from .._processes import ProcessOptions, process_options
from ..base.util import dumps
from ..engine.children import ChildPool
from ..engine.locks import write_through_blip
from ..engine.routing import handler as routing_handler
from ..engine.routing import sendable
from . import _options as opt
from .job import GroupJob
from .queue import GroupQueue

DEFAULT_CONCURRENCY = 1     # GroupMQ's default (one job at a time per worker)
Handler = Callable[[GroupJob], Any]


def as_handler(value: Any) -> Handler:
    """A function, or the one ``"package.module:function"`` names (imported now); a
    mapping is refused: a group job has no name to route by."""
    if isinstance(value, Mapping):
        raise opt.GroupOptionError("handler must be one function (or its import name): "
                                   "a group job has no name to route a mapping by")
    if not callable(value) and not isinstance(value, str):
        raise opt.GroupOptionError("handler must be callable, or a function's import name "
                                   "'package.module:function'")
    return cast(Handler, routing_handler(value, "handler"))


def options(concurrency: Optional[int], processes: Optional[int], job_timeout: Any,
            max_jobs_per_process: Optional[int]) -> Tuple[int, Optional[ProcessOptions]]:
    """The worker's concurrency (1 by default, as GroupMQ's; with ``processes``, as many) and its
    process options (None: handlers run on threads), checked as a Worker's."""
    if concurrency is None and processes is None:
        concurrency = DEFAULT_CONCURRENCY
    if concurrency is not None:
        opt.positive_int(concurrency, "concurrency")
    return process_options(processes, concurrency, job_timeout, max_jobs_per_process)


def spec(handler: Any) -> Any:
    """The handler as the children get it (refused now when it cannot be sent)."""
    return sendable(handler, "handler")


def child_pool(queue: GroupQueue, handler_spec: Any, settings: ProcessOptions) -> ChildPool:
    return settings.pool(handler_spec, GroupJobs(queue), queue.connection,
                         f"group-{queue.name}")


class GroupJobs:
    """A group job sent to a child as itself without its queue; the child's job gets a
    GroupQueue of its own on the child's connection (same name and options), so
    ``job.update_data``, ``job.get_state``... work there as on a thread. Its data comes
    back (``update_data`` in the child is seen by the parent's listeners)."""

    def __init__(self, queue: GroupQueue) -> None:
        self.name, self.settings = queue.name, queue.settings()

    def message(self, job: GroupJob) -> GroupJob:
        return replace(job, queue=None)

    def job(self, message: GroupJob, connection: Any, cache: Dict[str, Any]) -> GroupJob:
        queue = cache.get("queue")
        if queue is None:
            queue = cache["queue"] = GroupQueue(self.name, connection, **self.settings)
        message.queue = queue
        return message

    def report(self, job: GroupJob) -> Dict[str, Any]:
        try:
            dumps(job.data, "group job data")
        except TypeError:       # not JSON (the handler put something else there): kept
            return {}
        return {"data": job.data}

    def apply(self, job: GroupJob, report: Dict[str, Any]) -> None:
        if "data" in report:
            job.data = report["data"]


def give_back(queue: GroupQueue, job: GroupJob) -> bool:
    """The job back to its place in its group, waiting, no attempt counted, the group
    free again (through a Redis blip, as a failure is written); False when it was no
    longer this run's (recovered or removed meanwhile)."""
    reply = write_through_blip(
        lambda: queue.run_script("give_back", job.id, job.group_id, job.token),
        queue.job_timeout_ms / 1000.0)
    return bool(reply)
