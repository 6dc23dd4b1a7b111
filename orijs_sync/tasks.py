"""Tasks as decorated functions, as Celery's ``@app.task``, Huey's ``@huey.task`` and RQ's
``@job`` offer them, on top of BullMQ's model without hiding it:

    tasks = Tasks(connection=url)

    @tasks.task(queue="emails", attempts=3)
    def send_welcome(user_id: int) -> str: ...

    send_welcome.add(user_id=7)            # a job named "send_welcome", data {"user_id": 7}
    send_welcome.apply({"user_id": 7}, delay=60)   # the same, with job options for this add
    tasks.worker("emails", concurrency=4).run()    # runs every task of the queue

A task is a job name on a queue: its keyword arguments are the job's data (a JSON
object), its return value the job's return value. A Node producer adding a job of that
name and data to that queue reaches the same function.
"""
from __future__ import annotations

import importlib
import inspect
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import errors
from . import options as job_options
from .base import validate as check
from .job import Job
from .queue import Queue
from .store.connect import ConnectionOwner
from .store.connection import ConnectionLike
from .types import JobOptions, Unpack
from .worker import Worker

__all__ = ["Task", "Tasks"]


def _load_task(module: str, qualname: str) -> "Task":
    """A task found again by its import path (how a task reaches a child process)."""
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    if not isinstance(target, Task):
        raise TypeError(f"{module}.{qualname} is not a task")
    return target


class Task:
    """A function registered as a task: call it to run it here, ``add()`` to enqueue it."""

    def __init__(self, tasks: "Tasks", fn: Callable[..., Any], queue: str, name: str,
                 opts: Dict[str, Any]) -> None:
        self.tasks, self.fn, self.queue_name, self.name = tasks, fn, queue, name
        self.opts = opts
        self.__doc__, self.__name__ = fn.__doc__, fn.__name__
        self.__module__, self.__qualname__ = fn.__module__, fn.__qualname__
        self._signature = inspect.signature(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __reduce__(self) -> Any:
        return (_load_task, (self.__module__, self.__qualname__))

    def __repr__(self) -> str:
        return f"<Task {self.name} on queue {self.queue_name}>"

    def add(self, **kwargs: Any) -> Job:
        """Enqueue a run with these keyword arguments (checked against the function's
        signature now, not when a worker runs it)."""
        return self.apply(kwargs)

    delay = add

    def apply(self, kwargs: Optional[Mapping[str, Any]] = None,
              **opts: Unpack[JobOptions]) -> Job:
        """Enqueue a run with ``kwargs`` and job options (``Queue.add``'s keywords, a
        ``delay`` or ``run_at`` among them) for this add over the task's."""
        data = dict(check.mapping(kwargs, "kwargs"))
        try:
            self._signature.bind(**data)
        except TypeError as exc:
            check.bad_value("kwargs", data, f"do not fit {self.name}{self._signature}: {exc}")
        return self.tasks.queue(self.queue_name).add(self.name, data,
                                                     **job_options.merge(self.opts, opts))

    def run_job(self, job: Job) -> Any:
        """A worker's call: the function with the job's data as keyword arguments."""
        if not isinstance(job.data, dict):
            raise TypeError(f"task {self.name}: job {job.id}'s data is not a JSON object of "
                            f"keyword arguments: {job.data!r:.80}")
        return self.fn(**job.data)


class Tasks(ConnectionOwner):
    """A registry of tasks on one Redis (``connection``, ``prefix``): ``@tasks.task``
    registers a function; ``worker(queue)`` builds the Worker running a queue's tasks."""

    def __init__(self, connection: ConnectionLike = None, *, prefix: str = "bull") -> None:
        self._use_connection(connection)
        self.prefix = check.string(prefix, "prefix")
        self._tasks: Dict[str, Dict[str, Task]] = {}
        self._queues: Dict[str, Queue] = {}
        self._lock = threading.Lock()      # guards _tasks and _queues

    def task(self, queue: str = "default", *, name: Optional[str] = None,
             **opts: Unpack[JobOptions]) -> Callable[[Callable[..., Any]], Task]:
        """Register the decorated function as the job ``name`` (default: the function's
        name) of ``queue``, with default job options ``opts`` (``attempts``, ``backoff``...,
        checked now)."""
        check.name(queue, "queue")
        job_options.encode_defaults(opts, "task options")

        def register(fn: Callable[..., Any]) -> Task:
            check.function(fn, "task")
            task_name = check.string(name or fn.__name__, "name")
            with self._lock:
                known = self._tasks.setdefault(queue, {})
                if task_name in known:
                    check.bad_value("name", task_name, f"is already a task of queue {queue!r}")
                task = known[task_name] = Task(self, fn, queue, task_name, dict(opts))
            return task
        return register

    def configure(self, connection: ConnectionLike = None, *, prefix: Optional[str] = None) -> None:
        """Point the registry at its Redis after the tasks were declared (a module of
        tasks imported before the settings are read); before any task is added."""
        with self._lock:
            if self._queues:
                raise errors.InvalidStateError("configure() comes before the first add")
            if prefix is not None:
                self.prefix = check.string(prefix, "prefix")
            super().close()
            self._use_connection(connection)

    def tasks_of(self, queue: str) -> List[Task]:
        with self._lock:
            return list(self._tasks.get(queue, {}).values())

    def queue(self, name: str) -> Queue:
        """The Queue tasks of ``name`` are added to (one per queue, shared)."""
        with self._lock:
            queue = self._queues.get(name)
            if queue is None:
                queue = self._queues[name] = Queue(name, connection=self.connection,
                                                   prefix=self.prefix)
            return queue

    def routes(self, queue: str) -> Dict[str, Callable[[Job], Any]]:
        """``{job name: handler}`` for every task of ``queue``: the processor ``worker()``
        gives its Worker (any Worker takes it, also in process mode)."""
        tasks = self.tasks_of(queue)
        if not tasks:
            check.bad_value("queue", queue, "has no task registered")
        return {task.name: _TaskCall(task) for task in tasks}

    def worker(self, queue: str, **options: Any) -> Worker:
        """A Worker running every task of ``queue`` (by job name); ``options`` are
        Worker's (``concurrency``, ``processes``...)."""
        return Worker(queue, self.routes(queue), self.connection, prefix=self.prefix,
                      **options)

    def close(self) -> None:
        with self._lock:
            queues, self._queues = list(self._queues.values()), {}
        for queue in queues:
            queue.close()
        super().close()


class _TaskCall:
    """A task as a worker's handler; pickled as its task (found again by import path)."""

    def __init__(self, task: Task) -> None:
        self.task = task

    def __call__(self, job: Job) -> Any:
        return self.task.run_job(job)
