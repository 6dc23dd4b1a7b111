"""Queue: adding jobs and reading them back."""
from __future__ import annotations

import logging
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, cast

from . import errors
from . import options as job_options
from ._job_flow import attach_to_parent
from ._queue_bulk import BulkQueueMixin
from ._queue_control import QueueControlMixin, with_paused
from ._queue_getters import TYPE_NAMES, QueueGettersMixin
from ._queue_limits import LimitsQueueMixin
from ._queue_repeatable import RepeatableQueueMixin
from ._queue_schedulers import SchedulerQueueMixin
from ._queue_writes import QueueWritesMixin, check_events_max_len
from .base import validate as check
from .base.util import dumps, now_ms, script_json
from .engine.local import Handing
from .job import Job
from .keys import QueueKeys
from .metrics import MonitoringMixin
from .store.cluster import check_queue
from .store.connect import ConnectionOwner
from .store.connection import ConnectionLike, RedisConnection
from .store.scripts import Scripts
from .types import BulkJob, JobOptions, Unpack

log = logging.getLogger(__name__)

BULK_KEYS = ("name", "data", "opts")
COUNT_TYPES = ("waiting", "active", "completed", "failed", "delayed", "prioritized",
               "paused", "waiting-children")


class AddCall:
    """The arguments of one job in an ``addJob`` script call (shared by Queue and flows)."""

    def __init__(self, keys: QueueKeys, name: str, data: Any, opts: Dict[str, Any], *,
                 parent: Optional[Dict[str, Any]] = None, wait_children: bool = False,
                 repeat_job_key: Optional[str] = None) -> None:
        if not isinstance(name, str):
            raise errors.InvalidArgumentType(
                f"job name must be a string, not {type(name).__name__}")
        self.keys = keys
        self.name = name
        self.data = data
        self.opts = opts
        self.timestamp = int(opts.get("timestamp") or now_ms())
        data_text = dumps(data, f"data of job {name!r}")
        job_options.check_size(opts, data_text, f"job {name!r}")
        parent_key = deps_key = parent_text = ""
        if parent:
            parent_key = f"{parent['queueKey']}:{parent['id']}"
            deps_key = f"{parent_key}:dependencies"
            parent_text = script_json(parent, "parent")
        self.args = [opts.get("jobId") or "", name, self.timestamp,
                     data_text, script_json(opts, "job options"),
                     parent_key, parent_text, deps_key, repeat_job_key or "",
                     "1" if wait_children else ""]

    @staticmethod
    def run_batch(calls: Sequence["AddCall"], scripts: Scripts,
                  connection: RedisConnection) -> List[Any]:
        """One script call adding every job of ``calls`` (all of one queue): a result
        for each (see ``check_add_result``)."""
        return cast("List[Any]", AddCall._run(calls, scripts, connection, []))

    @staticmethod
    def _run(calls: Sequence["AddCall"], scripts: Scripts, connection: RedisConnection,
             extra: List[Any]) -> Any:
        k = calls[0].keys
        args: List[Any] = [k.base, len(calls)]
        for call in calls:
            args += call.args
        return connection.run_script(scripts, "addJob", [k.meta, k.id, k.events], args + extra)

    def run_handing(self, scripts: Scripts, connection: RedisConnection,
                    handing: Handing) -> Any:
        """Add this job and, in the same call, take the oldest waiting job of the queue
        for the Worker of this process ``handing`` reserved a slot on: the job taken
        goes to its handler pool, and the slot comes back when nothing was taken.
        Returns the add's result."""
        try:
            results, jobs = AddCall._run([self], scripts, connection, [script_json(handing.takes[0])])
        except BaseException:
            handing.cancel()
            raise
        handing.hand([jobs])
        return results[0]

    def job(self, queue: "Queue", job_id: str) -> Job:
        return Job._of_checked(queue, str(job_id), self.name, self.data, self.opts,
                               self.timestamp)


def check_add_result(result: Any, what: str) -> "tuple[str, bool]":
    """``(job id, existed already)`` from one addJob result; raises on an error code."""
    if isinstance(result, int) and result < 0:
        reasons = {-5: "its parent job does not exist",
                   -7: "a job with that id exists with another parent"}
        raise errors.ScriptError(f"could not add {what}: {reasons.get(result, result)}", result)
    return str(result[0]), bool(result[1])


class Queue(ConnectionOwner, QueueControlMixin, QueueGettersMixin, QueueWritesMixin,
            RepeatableQueueMixin, SchedulerQueueMixin, MonitoringMixin, BulkQueueMixin,
            LimitsQueueMixin):
    """A BullMQ queue. Thread-safe; share one instance across threads.

    ``connection`` is a URL, a dict of ``redis.Redis`` options, a ``redis.Redis``
    or ``None`` (localhost). ``default_job_options`` apply to every ``add``.
    ``events_max_len`` (BullMQ's ``streams.events.maxLen``) sets the length the
    queue's events stream is trimmed to (about; every writer, Node's too, trims to
    the stored value, 10000 by default); None leaves the stored value as it is.
    """

    def __init__(self, name: str, connection: ConnectionLike = None, *, prefix: str = "bull",
                 default_job_options: Optional[Mapping[str, Any]] = None,
                 events_max_len: Optional[int] = None) -> None:
        self.keys = QueueKeys(prefix, name)
        self.name = name
        self.prefix = prefix
        self.default_job_options = check.mapping(default_job_options, "default_job_options")
        job_options.encode_defaults(self.default_job_options, "default_job_options")  # fail early
        max_len = check_events_max_len(events_max_len)
        check_queue(connection, prefix, name)
        self._use_connection(connection)
        self.scripts = Scripts(self.client)
        self._store_events_max_len(max_len)

    def __repr__(self) -> str:
        return f"<Queue {self.keys.queue_key}>"

    def __reduce__(self) -> Any:
        """Pickled as its options (``multiprocessing`` spawn): the copy opens its own
        connections."""
        return (_rebuild_queue, (self.name, self.connection, self.prefix,
                                 self.default_job_options))

    # -- adding ------------------------------------------------------------
    def _add_call(self, name: str, data: Any, opts: Any,
                  arg: str = "job options") -> AddCall:
        check.string(name, "name", non_empty=False)
        opts = check.mapping(opts, arg)
        job_options.refuse_unsupported(opts, arg)
        check.known_keys(opts, job_options.KNOWN, arg)
        merged = job_options.merge(self.default_job_options, opts)
        parent = merged.pop("parent", None)      # a Job or {"id", "queue"}: add as its child
        encoded = job_options.encode(merged, arg=arg)
        stored_parent = attach_to_parent(parent, encoded) if parent is not None else None
        return AddCall(self.keys, name, data, encoded, parent=stored_parent)

    def add(self, name: str, data: Any = None, **opts: Unpack[JobOptions]) -> Job:
        """Add one job. Options are keywords (``orijs_sync.types.JobOptions``, checked by
        mypy; ``delay`` in seconds or ``run_at`` (a timezone-aware ``datetime``),
        ``priority``, ``attempts``,
        ``backoff`` (seconds for a fixed delay, or ``{"type": "fixed" | "exponential" | a
        strategy's name, "delay": seconds, "jitter": 0..1}``), ``job_id``,
        ``remove_on_complete``, ``deduplication={"id", "ttl", "extend", "replace",
        "keep_last_if_active"}``: see the compatibility page...).
        Nothing is written on bad input."""
        call = self._add_call(name, {} if data is None else data, opts)
        handing = Handing()
        if not call.opts.get("delay") and handing.reserve(self.connection, self.keys.marker):
            # a Worker of this process is free: it is handed a job
            return self._added(call, call.run_handing(self.scripts, self.connection, handing))
        return self._added(call, AddCall.run_batch([call], self.scripts, self.connection)[0])

    def add_bulk(self, jobs: Iterable[BulkJob]) -> List[Job]:
        """Add many jobs in one round trip (one atomic script call): ``[{"name", "data",
        "opts"}]`` (``orijs_sync.types.BulkJob``), ``opts`` as ``add``'s keywords."""
        if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Iterable):
            check.bad_type("jobs", jobs, "a list of {'name', 'data', 'opts'} dicts")
        calls = []
        for i, spec in enumerate(jobs):
            where = f"jobs[{i}]"
            check.mapping(spec, where, allow_none=False)
            check.known_keys(spec, BULK_KEYS, where)
            if "name" not in spec:
                check.bad_value(where, spec, "needs a 'name'")
            data = spec.get("data")
            calls.append(self._add_call(spec["name"], {} if data is None else data,
                                        spec.get("opts"), f"{where}.opts"))
        if not calls:
            return []
        results = AddCall.run_batch(calls, self.scripts, self.connection)
        return [self._added(call, result) for call, result in zip(calls, results)]

    def _added(self, call: AddCall, result: Any) -> Job:
        """The job an add gave: the one written, or the one already there (as stored)."""
        job_id, existed = check_add_result(result, f"job {call.name!r}")
        if existed:
            job = self.get_job(job_id)
            if job is not None:
                return job
        job = call.job(self, job_id)
        if not existed:
            job._added_event = str(result[2])
        return job

    # -- reading -----------------------------------------------------------
    def get_job(self, job_id: str) -> Optional[Job]:
        """The job as stored, or None. A hash that cannot be decoded (written by hand or
        by another program) still comes back: ``job.problem`` says which field is bad."""
        job_id = check.job_id(job_id)
        fields = self.client.hgetall(self.keys.job(job_id))
        return Job.from_hash(self, job_id, cast("Dict[str, str]", fields)) if fields else None

    def get_job_counts(self, *types: str) -> Dict[str, int]:
        """Counts per state; all of BullMQ's states when no type is named. As BullMQ's
        ``getJobCounts``: ``"waiting"`` brings ``"paused"`` with it (a paused queue's
        waiting jobs), ``"wait"`` counts the wait list alone, ``"repeat"`` the legacy
        repeatable jobs."""
        wanted = with_paused(check.one_of(t, TYPE_NAMES, "types", "job state")
                             for t in types) or list(COUNT_TYPES)
        pipe = self.client.pipeline(transaction=False)
        for kind in wanted:
            key = self.keys.key("wait" if kind == "waiting" else kind)
            (pipe.llen if kind in ("waiting", "wait", "active", "paused") else pipe.zcard)(key)
        return dict(zip(wanted, (int(n) for n in pipe.execute())))

    def count(self) -> int:
        """Jobs waiting to be processed: waiting + paused + delayed + prioritized + waiting-children."""
        counts = self.get_job_counts("waiting", "paused", "delayed", "prioritized", "waiting-children")
        return sum(counts.values())

    def get_job_state(self, job_id: str) -> str:
        """One of completed, failed, delayed, active, waiting, prioritized,
        waiting-children, or unknown."""
        return str(self.scripts.run("getState", [self.keys.base], [check.job_id(job_id)]))


def _rebuild_queue(name: str, connection: Any, prefix: str,
                   default_job_options: Dict[str, Any]) -> "Queue":
    queue = Queue(name, connection, prefix=prefix, default_job_options=default_job_options)
    queue._owns_connection = True     # unpickled: a connection of its own
    return queue
