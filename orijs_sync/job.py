"""Job: one job hash <-> a Python object, and the calls a handler makes on its job.

Field names follow BullMQ v5: ``atm`` (attemptsMade), ``ats`` (attemptsStarted),
``stc`` (stalledCounter), ``defa`` (deferred failure), ``rjk`` (repeat job key),
``deid`` (deduplication id), ``pb`` (processed by).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Protocol, cast

from . import errors, options
from ._job_actions import JobActionsMixin
from ._job_children import ChildrenJobMixin
from ._job_flow import FlowJobMixin
from ._job_manual import ManualJobMixin
from ._job_state import JobStateMixin, append_log, write_progress
from .base import validate as check
from .base.util import StoredTimes, dumps, loads, now_ms, stored_int

if TYPE_CHECKING:  # pragma: no cover
    from .base.cancellation import Cancellation
    from .keys import QueueKeys
    from .queue_events import QueueEvents
    from .store.scripts import Scripts


class QueueLike(Protocol):
    """What a Job needs of its queue: a Queue, or a worker's view of one."""

    name: str
    prefix: str
    keys: "QueueKeys"
    client: Any
    scripts: "Scripts"

    def get_job_state(self, job_id: str) -> str: ...

    def remove(self, job_id: str, *, remove_children: bool = True) -> bool: ...


REQUIRED_FIELDS = ("name", "data", "opts", "timestamp")


def _json_field(fields: Mapping[str, str], name: str, default: Any, problems: List[str]) -> Any:
    """A JSON field of the hash; text that is not JSON is kept as it is and noted."""
    text = fields.get(name)
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        problems.append(f"{name} is not JSON: {exc} (it starts {text[:40]!r})")
        return text


class Job(JobActionsMixin, FlowJobMixin, ManualJobMixin, ChildrenJobMixin, JobStateMixin,
          StoredTimes):
    """A job as stored in Redis. Created by ``Queue.add``/``get_job`` and by workers.

    Times are BullMQ's epoch milliseconds as stored (``timestamp``, ``processed_on``,
    ``finished_on``) and the same as aware UTC ``datetime``s (``created_at``,
    ``processed_at``, ``finished_at``)."""

    def __init__(self, queue: "QueueLike", job_id: str, name: str, data: Any,
                 opts: Optional[Dict[str, Any]] = None, timestamp: Optional[int] = None) -> None:
        self._assign(queue, check.job_id(job_id), check.string(name, "name", non_empty=False),
                     data, check.mapping(opts, "opts"),
                     now_ms() if timestamp is None else
                     check.integer(timestamp, "timestamp", minimum=0, maximum=check.MAX_INT))

    def _assign(self, queue: "QueueLike", job_id: str, name: str, data: Any,
                opts: Dict[str, Any], timestamp: int) -> None:
        """Every attribute, from checked values (the constructor's arguments, or a hash
        ``from_hash`` decoded)."""
        self.queue = queue
        self.id = job_id
        self.name = name
        self.data = data
        self.opts: Dict[str, Any] = opts
        self.timestamp = timestamp
        self.delay = int(opts.get("delay", 0) or 0)
        self.priority = int(opts.get("priority", 0) or 0)
        self.progress: Any = 0
        self.returnvalue: Any = None
        self.failed_reason: Optional[str] = None
        self.stacktrace: List[str] = []
        self.attempts_made = 0
        self.attempts_started = 0
        self.stalled_counter = 0
        self.processed_on: Optional[int] = None
        self.finished_on: Optional[int] = None
        self.processed_by: Optional[str] = None
        self.parent_key: Optional[str] = None
        self.parent: Optional[Dict[str, Any]] = None
        # The processed hash read with the job when a worker took it (see _children_values)
        self._fetched_children: Optional[Dict[str, str]] = None
        self.repeat_job_key: Optional[str] = None
        self.deduplication_id: Optional[str] = None
        self.deferred_failure: Optional[str] = None
        # Why the stored hash cannot be used as it is (a field not JSON...), or None.
        self.problem: Optional[str] = None
        # Set while a worker processes the job.
        self.token: Optional[str] = None
        self._worker: Any = None
        self._moved = False  # the handler moved the job itself (delayed, waiting-children)
        self._finishing = False  # its outcome is being written (its lock is going away)
        self._discarded = False  # job.discard(): a failure is not retried
        self._handler_done = False  # its worker's handler returned (or raised)
        self._cancel: Optional["Cancellation"] = None    # made by .cancellation
        self._lock_until = float("inf")  # time.monotonic() when its lock runs out, unrenewed
        # A taken job's hash as the script returned it (flat), decoded by _read_taken()
        # on the thread that runs it, not on the one that took it
        self._unread: Optional[List[str]] = None
        self._fields: Optional[Dict[str, str]] = None   # and decoded (sent to a child process)
        # The id of the "added" event its Queue.add wrote: every outcome of this run is
        # written after it in the events stream (None when not added by this object)
        self._added_event: Optional[str] = None

    # -- (de)serialization -------------------------------------------------
    @classmethod
    def from_hash(cls, queue: "QueueLike", job_id: str, fields: Mapping[str, str]) -> "Job":
        """The job a hash holds. A hash that cannot be decoded still gives a Job, with
        ``problem`` naming the first bad field (a worker fails such a job at once)."""
        job = cls._shell(queue, job_id)
        job._load(fields)
        return job

    @classmethod
    def _shell(cls, queue: "QueueLike", job_id: str) -> "Job":
        """A job known by its id only, its fields to be loaded (the constructor's checks
        are for arguments, not for what Redis holds)."""
        return cls._of_checked(queue, str(job_id), "", None, {}, 0)

    @classmethod
    def _of_checked(cls, queue: "QueueLike", job_id: str, name: str, data: Any,
                    opts: Dict[str, Any], timestamp: int) -> "Job":
        """A job from values checked already (an add's), without checking them again."""
        job = cls.__new__(cls)
        job._assign(queue, job_id, name, data, opts, timestamp)
        return job

    def _read_taken(self) -> None:
        """Decode the hash a worker's script returned with this job (see ``_unread``); a
        hash that cannot be decoded leaves ``problem`` set (the job then fails)."""
        flat, self._unread = self._unread, None
        if flat is None:
            return
        raw = self._fields = dict(zip(flat[::2], flat[1::2]))
        try:
            self._load(raw)
        except Exception as exc:  # noqa: BLE001 - a poison hash fails its job only
            self.name = str(raw.get("name", ""))
            self.problem = f"the job hash cannot be read: {exc}"

    def _load(self, fields: Mapping[str, str]) -> None:
        """Set every field from the job's hash, noting in ``problem`` what cannot be used."""
        problems: List[str] = []
        missing = [f for f in REQUIRED_FIELDS if f not in fields]
        if missing:
            problems.append(f"the job hash has no {', '.join(missing)} field")
        if stored_int(fields.get("timestamp"), None) is None and fields.get("timestamp"):
            problems.append(f"timestamp is not a number: {fields['timestamp']!r:.40}")
        data = _json_field(fields, "data", {}, problems)
        opts = _json_field(fields, "opts", {}, problems)
        opts_problem = options.stored_problem(opts)
        if opts_problem:
            problems.append(opts_problem)
            opts = {}
        timestamp = stored_int(fields.get("timestamp"), 0) or 0
        if not 0 <= timestamp <= check.MAX_INT:
            problems.append(f"timestamp is out of range: {timestamp}")
            timestamp = 0
        self.name, self.data, self.opts, self.timestamp = \
            str(fields.get("name", "")), data, opts, timestamp
        self.delay = stored_int(fields.get("delay"), 0) or 0
        self.priority = stored_int(fields.get("priority"), 0) or 0
        self.progress = loads(fields.get("progress"), 0)
        self.returnvalue = loads(fields.get("returnvalue"))
        self.failed_reason = fields.get("failedReason")
        stack = _json_field(fields, "stacktrace", [], problems)
        if not isinstance(stack, list) or not all(isinstance(s, str) for s in stack):
            problems.append(f"stacktrace is not a JSON list of strings: {stack!r:.80}")
            stack = []
        self.stacktrace = stack
        self.attempts_made = stored_int(fields.get("atm") or fields.get("attemptsMade"), 0) or 0
        self.attempts_started = stored_int(fields.get("ats"), 0) or 0
        self.stalled_counter = stored_int(fields.get("stc"), 0) or 0
        self.processed_on = stored_int(fields.get("processedOn"))
        self.finished_on = stored_int(fields.get("finishedOn"))
        self.processed_by = fields.get("pb")
        self.parent_key = fields.get("parentKey")
        self.parent = _json_field(fields, "parent", None, problems)
        self.repeat_job_key = fields.get("rjk")
        self.deduplication_id = fields.get("deid")
        self.deferred_failure = fields.get("defa")
        self.problem = "; ".join(problems) or None

    def to_dict(self) -> Dict[str, Any]:
        """The job's fields under BullMQ's ``Job.asJSON`` names (for logs and the CLI)."""
        return {
            "id": self.id, "name": self.name, "data": self.data, "opts": self.opts,
            "progress": self.progress, "attemptsMade": self.attempts_made,
            "attemptsStarted": self.attempts_started, "stalledCounter": self.stalled_counter,
            "timestamp": self.timestamp, "delay": self.delay, "priority": self.priority,
            "processedOn": self.processed_on, "finishedOn": self.finished_on,
            "returnvalue": self.returnvalue, "failedReason": self.failed_reason,
            "stacktrace": self.stacktrace, "parentKey": self.parent_key,
            "repeatJobKey": self.repeat_job_key, "deduplicationId": self.deduplication_id,
        }

    def __repr__(self) -> str:
        return f"<Job {self.queue.name}:{self.id} name={self.name!r}>"

    # -- options -----------------------------------------------------------
    @property
    def attempts(self) -> int:
        """Total attempts allowed (BullMQ stores 0 for the default of one)."""
        return max(int(self.opts.get("attempts") or 1), 1)

    @property
    def key(self) -> str:
        """The job's hash key in Redis (``{prefix}:{queue}:{id}``)."""
        return cast(str, self.queue.keys.job(self.id))

    # -- reads -------------------------------------------------------------
    def refresh(self) -> "Job":
        """Read the job's stored fields again into this object; ``JobNotFound`` when it is
        gone."""
        fields = self.queue.client.hgetall(self.key)
        if not fields:
            raise errors.JobNotFound(f"job {self.id} of queue {self.queue.name} no longer exists")
        fresh = Job.from_hash(self.queue, self.id, fields)
        kept = {name: self.__dict__[name] for name in ("token", "_worker", "_discarded", "_cancel")}
        self.__dict__.update(fresh.__dict__)
        self.__dict__.update(kept)
        return self

    def get_state(self) -> str:
        """The job's state now: ``waiting``, ``active``, ``delayed``, ``prioritized``,
        ``waiting-children``, ``completed``, ``failed`` or ``unknown``."""
        return cast(str, self.queue.get_job_state(self.id))

    def is_completed(self) -> bool:
        """Whether the job is completed now (``get_state``)."""
        return self.get_state() == "completed"

    def is_failed(self) -> bool:
        """Whether the job is failed now (``get_state``)."""
        return self.get_state() == "failed"

    # -- writes from a handler or a client ---------------------------------
    def update_progress(self, progress: Any) -> None:
        """Store the job's progress (any JSON value); QueueEvents of either side see it."""
        write_progress(self.queue, self.id, progress)
        self.progress = progress
        if self._worker is not None:          # a worker's job: its "progress" listeners
            self._worker._emit("progress", self, progress)

    def log(self, line: str) -> int:
        """Append ``line`` to the job's log (BullMQ's ``job.log``); returns the log's length."""
        return append_log(self.queue, self.id, line, int(self.opts.get("kl") or 0))

    def update_data(self, data: Any) -> None:
        """Replace the job's data (any JSON value); ``JobNotFound`` when it is gone."""
        text = dumps(data, "job data")
        if not self.queue.client.exists(self.key):
            raise errors.JobNotFound(f"job {self.id} not found")
        self.queue.client.hset(self.key, "data", text)
        self.data = data

    def wait_until_finished(self, events: "QueueEvents", timeout: Optional[float] = None) -> Any:
        """Block until the job completes (return value) or fails (raises ``JobFailed``)."""
        return events._wait(self.queue, self.id, timeout, self._added_event)
