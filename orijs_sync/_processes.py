"""A Worker's process mode (``processes=``): its options, checked, and how a plain queue's
job crosses to a child process and back (``engine.children`` runs the children)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from .base import validate as check
from .engine.children import ChildPool
from .engine.routing import ProcessorLike, sendable
from .job import Job
from .queue import Queue
from .store.connection import RedisConnection

MAX_PROCESSES = 1024


@dataclass(frozen=True)
class ProcessOptions:
    """``processes`` children, ``job_timeout`` seconds per job (None: no limit), a child
    replaced after ``max_jobs_per_process`` jobs (None: never)."""

    processes: int
    job_timeout: Optional[float]
    max_jobs_per_process: Optional[int]

    def pool(self, spec: Any, codec: Any, connection: RedisConnection, label: str) -> ChildPool:
        """The children running ``spec`` (checked by ``routing.sendable``), jobs carried
        by ``codec``: a plain queue's (``QueueJobs``) or a group queue's."""
        return ChildPool(spec, codec, connection, size=self.processes,
                         job_timeout=self.job_timeout, max_jobs=self.max_jobs_per_process,
                         label=label)


def process_options(processes: Optional[int], concurrency: Optional[int],
                    job_timeout: Any, max_jobs_per_process: Optional[int],
                    ) -> Tuple[int, Optional[ProcessOptions]]:
    """The worker's concurrency and its process options (None: handlers run on threads).
    ``job_timeout`` and ``max_jobs_per_process`` need ``processes``: a thread cannot be
    killed nor recycled, so they are refused without it rather than ignored."""
    if concurrency is not None:
        concurrency = check.integer(concurrency, "concurrency", minimum=1, maximum=10_000)
    if processes is None:
        for arg, value in (("job_timeout", job_timeout),
                           ("max_jobs_per_process", max_jobs_per_process)):
            if value is not None:
                check.bad_value(arg, value, "needs processes=N (a handler thread cannot be "
                                "stopped or recycled; run handlers in child processes)")
        return (1 if concurrency is None else concurrency), None
    processes = check.integer(processes, "processes", minimum=1, maximum=MAX_PROCESSES)
    if concurrency is None:
        concurrency = processes
    elif concurrency < processes:
        check.bad_value("concurrency", concurrency, f"must be at least processes ({processes}): "
                        f"only {concurrency} of the {processes} child processes could be busy")
    timeout = check.seconds(job_timeout, "job_timeout")
    if timeout is not None and timeout <= 0:
        check.bad_value("job_timeout", job_timeout, "must be > 0 seconds")
    if max_jobs_per_process is not None:
        max_jobs_per_process = check.integer(max_jobs_per_process, "max_jobs_per_process",
                                             minimum=1)
    return concurrency, ProcessOptions(processes, timeout, max_jobs_per_process)


def describe(concurrency: int, options: Optional[ProcessOptions]) -> str:
    """How a worker runs its handlers, for its start-up line."""
    if options is None:
        return f"concurrency {concurrency}"
    return f"{options.processes} child processes, concurrency {concurrency}"


def child_pool(processor: ProcessorLike, options: ProcessOptions, connection: RedisConnection,
               prefix: str, label: str) -> ChildPool:
    return options.pool(sendable(processor), QueueJobs(prefix), connection, label)


class QueueJobs:
    """A plain queue's job, sent to a child as its hash (the child decodes it) with its
    lock token; the child's Job has a Queue of its own on the child's connection, so
    ``update_progress``, ``log``, ``move_to_delayed``... work there as on a thread."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def message(self, job: Job) -> Tuple[Any, ...]:
        return (job.queue.name, job.id, job._fields, job.token, job._fetched_children)

    def job(self, message: Tuple[Any, ...], connection: RedisConnection,
            cache: Dict[str, Any]) -> Job:
        name, job_id, fields, token, children = message
        queue = cache.get(name)
        if queue is None:
            queue = cache[name] = Queue(name, connection=connection, prefix=self.prefix)
        job = Job.from_hash(queue, job_id, fields)
        job.token, job._fetched_children = token, children
        return job

    def report(self, job: Job) -> Dict[str, Any]:
        return {"moved": job._moved, "progress": job.progress}

    def apply(self, job: Job, report: Dict[str, Any]) -> None:
        if report.get("moved"):
            job._moved = True
        if "progress" in report:
            job.progress = report["progress"]
