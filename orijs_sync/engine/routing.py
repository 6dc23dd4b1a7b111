"""A worker's processor given as a mapping ``{job_name: function}``: jobs are routed by
name (one queue, several kinds of task); a name with no function fails the job, for
good, with a reason naming the names the worker knows."""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Union

from .. import errors
from ..base import validate as check
from ..job import Job

Handler = Callable[[Job], Any]
ProcessorLike = Union[Handler, Mapping[str, Handler]]


class Router:
    """Calls the function registered for ``job.name``."""

    def __init__(self, routes: Mapping[str, Handler]) -> None:
        self.routes: Dict[str, Handler] = {}
        for name, fn in routes.items():
            check.string(name, "processor key", non_empty=False)
            self.routes[name] = check.function(fn, f"processor[{name!r}]")
        if not self.routes:
            check.bad_value("processor", routes, "must name at least one job name")

    def __call__(self, job: Job) -> Any:
        fn = self.routes.get(job.name)
        if fn is None:
            known = ", ".join(repr(n) for n in sorted(self.routes))
            raise errors.UnrecoverableError(
                f"no handler for job name {job.name!r} in this worker (it handles {known})")
        return fn(job)


def as_processor(processor: Any) -> Handler:
    """A function, or a Router for a mapping; anything else is refused."""
    if isinstance(processor, Mapping):
        return Router(processor)
    return check.function(processor, "processor")  # type: ignore[no-any-return]
