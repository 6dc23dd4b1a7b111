"""Typed shapes of the public API's option dicts, for mypy and IDEs.

``JobOptions`` is what ``Queue.add``, ``Task.apply`` and ``@tasks.task`` take as
keywords (PEP 692's ``**opts: Unpack[JobOptions]``), and what the ``opts`` of an
``add_bulk`` entry, a flow node or a scheduler's template hold: a misspelt option or
a value of the wrong type is flagged by a type checker before the code runs. The
checks at run time are unchanged (``orijs_sync.options``): an untyped caller's bad
option still raises, before anything is written.

Durations are seconds (a number or a ``timedelta``); points in time are
timezone-aware ``datetime``s (or epoch seconds); ``timestamp`` is BullMQ's epoch
milliseconds.
"""

import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, List, Union

if sys.version_info >= (3, 11):
    from typing import Required, TypedDict, Unpack
else:  # pragma: no cover - the typing of Python 3.11, backported
    from typing_extensions import Required, TypedDict, Unpack

if TYPE_CHECKING:  # pragma: no cover
    from .job import Job

__all__ = ["BackoffOptions", "BulkJob", "DeduplicationOptions", "FlowJob", "JobOptions",
           "JobTemplate", "KeepJobs", "ParentRef", "TelemetryOptions", "Unpack"]

Duration = Union[int, float, timedelta]
Moment = Union[datetime, int, float]


class BackoffOptions(TypedDict, total=False):
    """``backoff=``: ``type`` is ``"fixed"``, ``"exponential"`` or a worker's
    strategy's name; ``delay`` in seconds; ``jitter`` 0..1."""

    type: Required[str]
    delay: Duration
    jitter: float


class KeepJobs(TypedDict, total=False):
    """``remove_on_complete=`` / ``remove_on_fail=`` as ``{"age": seconds, "count": n}``."""

    age: float
    count: int
    limit: int


class DeduplicationOptions(TypedDict, total=False):
    """``deduplication=`` (BullMQ's ``de``): ``ttl`` in seconds."""

    id: Required[str]
    ttl: Duration
    extend: bool
    replace: bool
    keep_last_if_active: bool


class TelemetryOptions(TypedDict, total=False):
    """``telemetry=``: the trace context's carrier as JSON text, and whether to omit it."""

    metadata: str
    omit_context: bool


class ParentRef(TypedDict):
    """A parent job by id and queue key (``"{prefix}:{queue}"``), BullMQ's form."""

    id: str
    queue: str


class JobOptions(TypedDict, total=False):
    """The options of one job, as ``Queue.add`` keywords (every one optional)."""

    delay: Duration
    run_at: Moment
    priority: int
    lifo: bool
    attempts: int
    backoff: Union[Duration, BackoffOptions]
    job_id: str
    deduplication: DeduplicationOptions
    debounce: DeduplicationOptions
    remove_on_complete: Union[bool, int, KeepJobs]
    remove_on_fail: Union[bool, int, KeepJobs]
    timestamp: float
    fail_parent_on_failure: bool
    continue_parent_on_failure: bool
    ignore_dependency_on_failure: bool
    remove_dependency_on_failure: bool
    keep_logs: int
    stack_trace_limit: int
    parent: Union["Job", ParentRef]
    telemetry: TelemetryOptions
    size_limit: int


class BulkJob(TypedDict, total=False):
    """One entry of ``Queue.add_bulk``."""

    name: Required[str]
    data: Any
    opts: JobOptions


class JobTemplate(TypedDict, total=False):
    """A job scheduler's ``template``: its runs' name (default: the scheduler's id),
    data and options (``job_id``, ``delay``, ``run_at``, ``parent``, ``timestamp``
    and deduplication are the scheduler's: refused)."""

    name: str
    data: Any
    opts: JobOptions


class FlowJob(TypedDict, total=False):
    """One node of a flow (``FlowProducer.add``) and its children."""

    name: Required[str]
    queue_name: Required[str]
    data: Any
    opts: JobOptions
    children: List["FlowJob"]
    prefix: str
