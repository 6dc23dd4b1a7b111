"""A worker's processor: a function, the import name of one (``"package.module:function"``,
as gunicorn and Celery name their targets), or a mapping ``{job_name: function or name}``:
jobs are then routed by name (one queue, several kinds of task); a name with no function
fails the job, for good, with a reason naming the names the worker knows."""
from __future__ import annotations

import importlib
import pickle
from typing import Any, Callable, Dict, Mapping, Union

from .. import errors
from ..base import validate as check
from ..job import Job

Handler = Callable[[Job], Any]
HandlerLike = Union[Handler, str]
ProcessorLike = Union[HandlerLike, Mapping[str, HandlerLike]]


class Router:
    """Calls the function registered for ``job.name``."""

    def __init__(self, routes: Mapping[str, Handler]) -> None:
        self.routes: Dict[str, Handler] = {}
        for name, fn in routes.items():
            check.string(name, "processor key", non_empty=False)
            self.routes[name] = handler(fn, f"processor[{name!r}]")
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
    """A function (given, or by its import name), or a Router for a mapping; anything
    else is refused."""
    if isinstance(processor, Mapping):
        return Router(processor)
    return handler(processor, "processor")


def handler(value: Any, arg: str) -> Handler:
    """A function, or the one ``"package.module:function"`` names (imported now)."""
    if isinstance(value, str):
        return import_handler(value, arg)
    return check.function(value, arg)  # type: ignore[no-any-return]


def import_handler(name: str, arg: str) -> Handler:
    module_name, sep, attr = name.partition(":")
    if not sep or not module_name or not attr:
        check.bad_value(arg, name, "must name a function as 'package.module:function'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        check.bad_value(arg, name, f"names a module that cannot be imported ({exc})")
    for part in attr.split("."):
        if not hasattr(target, part):
            check.bad_value(arg, name, f"names nothing: {module_name} has no {attr}")
        target = getattr(target, part)
    return check.function(target, arg)  # type: ignore[no-any-return]


def sendable(processor: Any, name: str = "processor") -> Any:
    """``processor`` as a child process gets it: checked (imported) here, and pickled by
    reference (a function defined at a module's top level, or an import name); a lambda
    or a nested function is refused, naming the way out (and ``name``, the argument)."""
    as_processor(processor)
    items = processor.items() if isinstance(processor, Mapping) else [("", processor)]
    for key, fn in items:
        if isinstance(fn, str):
            continue
        try:
            pickle.loads(pickle.dumps(fn))
        except Exception as exc:  # noqa: BLE001 - what pickle raises varies
            arg = f"{name}[{key!r}]" if key else name
            check.bad_value(arg, fn, f"cannot be sent to a child process ({exc}); with "
                            f"processes=, give a function defined at a module's top "
                            f"level, or its name as 'package.module:function'")
    return dict(processor) if isinstance(processor, Mapping) else processor
