"""Job schedulers (BullMQ v5's "job schedulers"): one job per period, on a cron
pattern or every N seconds, whatever the number of producers and workers.

Layout, as BullMQ writes it: the ``repeat`` zset maps each scheduler id to the
time of its next run (ms); the hash ``repeat:<id>`` holds ``name``, ``pattern``
or ``every`` (ms), ``tz``, ``limit``, ``startDate``/``endDate`` (ms), ``offset``,
``ic`` (iteration count) and the template's ``data`` and ``opts``. The job of a
run has the id ``repeat:<id>:<run ms>`` and the field ``rjk`` (the scheduler id),
so two writers of the same run meet on one key and only one job exists.

The next run is scheduled when a worker takes the current run's job (as BullMQ's
workers do): ``schedule_next`` is that hook. Only the scheduler's current
run may produce the next one, once, atomically in ``updateJobScheduler.lua``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from croniter import croniter

from . import errors
from . import options as job_options
from .base import validate as check
from .base.util import Seconds, dumps, loads, now_ms, script_json, stored_int, to_seconds, utc_datetime

if TYPE_CHECKING:  # pragma: no cover
    from .job import Job
    from .queue import Queue

log = logging.getLogger(__name__)

DateLike = Union[datetime, int, float]

# Template options that a scheduler decides itself.
_REFUSED_TEMPLATE_OPTS = {"job_id": "the scheduler gives each run's job its id",
                          "delay": "the scheduler decides when each run starts",
                          "run_at": "the scheduler decides when each run starts",
                          "parent": "a scheduler's jobs cannot belong to a flow",
                          "timestamp": "the scheduler stamps each run's job"}
_UNDEDUPLICATED = ("deduplication", "debounce")
_TEMPLATE_KEYS = {"name", "data", "opts"}
_LEGACY_SEGMENTS = 5  # legacy repeatable-job keys have 5+ ':'-separated parts


@dataclass(frozen=True)
class JobSchedulerInfo:
    """A scheduler as stored: times in ms since the epoch (``next``, ``start_date``,
    ``end_date``; ``next_at`` is ``next`` as an aware UTC ``datetime``), ``every`` in
    seconds.

    ``template`` is ``{"data": ..., "opts": ...}`` with ``opts`` in BullMQ's
    stored encoding (camelCase, short names), as Node reads it.
    """

    id: str
    name: str
    next: Optional[int]
    every: Optional[float] = None
    pattern: Optional[str] = None
    tz: Optional[str] = None
    start_date: Optional[int] = None
    end_date: Optional[int] = None
    limit: Optional[int] = None
    offset: Optional[int] = None
    iteration_count: Optional[int] = None
    template: Dict[str, Any] = field(default_factory=dict)

    @property
    def next_at(self) -> Optional[datetime]:
        """When the next run is due (``next``), UTC; None when there is none."""
        return utc_datetime(self.next)

    @classmethod
    def from_hash(cls, scheduler_id: str, fields: Mapping[str, str],
                  next_millis: Optional[int]) -> "JobSchedulerInfo":
        every = stored_int(fields.get("every"))
        template: Dict[str, Any] = {}
        if fields.get("data"):
            template["data"] = loads(fields["data"])
        if fields.get("opts"):
            template["opts"] = loads(fields["opts"])
        return cls(id=scheduler_id, name=fields.get("name", ""), next=next_millis,
                   every=None if every is None else every / 1000.0,
                   pattern=fields.get("pattern") or None, tz=fields.get("tz") or None,
                   start_date=stored_int(fields.get("startDate")),
                   end_date=stored_int(fields.get("endDate")),
                   limit=stored_int(fields.get("limit")), offset=stored_int(fields.get("offset")),
                   iteration_count=stored_int(fields.get("ic")), template=template)


# -- cron ------------------------------------------------------------------

def _six_fields(pattern: str) -> bool:
    return len(pattern.split()) == 6


def validate_pattern(pattern: Any) -> str:
    """A cron pattern of 5 fields, or 6 with seconds first (as BullMQ's cron-parser reads it)."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise errors.InvalidArgument(f"pattern must be a cron string, not {pattern!r}")
    count = len(pattern.split())
    if count not in (5, 6):
        raise errors.InvalidArgument(
            f"cron pattern {pattern!r} must have 5 fields (or 6, seconds first), "
            f"not {count}")
    try:
        valid = croniter.is_valid(pattern, second_at_beginning=count == 6)
    except Exception:  # noqa: BLE001 - croniter may raise on odd text
        valid = False
    if not valid:
        raise errors.InvalidArgument(f"invalid cron pattern {pattern!r}")
    return pattern


def _zone(tz: Optional[str]) -> Any:
    if tz is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise errors.InvalidArgument(f"unknown time zone {tz!r}") from exc


def cron_next_millis(pattern: str, after_ms: int, *, tz: Optional[str] = None,
                     start_date: Optional[int] = None,
                     end_date: Optional[int] = None) -> Optional[int]:
    """The first time (ms) matching ``pattern`` strictly after ``after_ms`` (or after
    ``start_date`` when later); ``None`` past ``end_date``. Without ``tz`` the pattern
    is read in the process's local time, as cron-parser does in Node."""
    current = max(after_ms, int(start_date or 0))
    zone = _zone(tz)
    start = (datetime.fromtimestamp(current / 1000.0, zone) if zone is not None
             else datetime.fromtimestamp(current / 1000.0))
    try:
        following = croniter(pattern, start, second_at_beginning=_six_fields(pattern))
        nxt = following.get_next(datetime)
    except (ValueError, KeyError) as exc:  # croniter errors are ValueErrors
        raise errors.InvalidArgument(f"cron pattern {pattern!r} has no next run: {exc}") from exc
    millis = int(round(nxt.timestamp() * 1000))
    if end_date is not None and millis > int(end_date):
        return None
    return millis


# -- options ---------------------------------------------------------------

def _date_ms(value: Optional[DateLike], name: str) -> Optional[int]:
    """A datetime (naive = local time) or a number of ms since the epoch."""
    if value is None:
        return None
    if isinstance(value, datetime):
        try:
            return int(round(value.timestamp() * 1000))
        except (OverflowError, ValueError, OSError) as exc:
            check.bad_value(name, value, f"is not a usable date ({exc})")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        check.bad_type(name, value, "a datetime or ms since the epoch")
    return int(check.number(value, name, minimum=0, maximum=check.MAX_INT))


def _every_ms(every: Seconds) -> int:
    try:
        seconds = to_seconds(every, "every", allow_none=False)
    except ValueError as exc:
        raise errors.InvalidArgument(
            f"every must be a number of seconds > 0 or a timedelta: {exc}") from None
    ms = int(round(float(seconds) * 1000))  # type: ignore[arg-type]
    if ms <= 0:
        raise errors.InvalidArgument(f"every must be > 0 seconds (at least 1 ms), got {every!r}")
    return ms


def _template(scheduler_id: str, template: Optional[Mapping[str, Any]],
              defaults: Mapping[str, Any]) -> "tuple[str, str, Dict[str, Any]]":
    """(name, data JSON text, encoded opts) of the jobs a scheduler makes."""
    template = check.mapping(template, "template")
    check.known_keys(template, _TEMPLATE_KEYS, "template")
    name = template.get("name", scheduler_id)
    if not isinstance(name, str) or not name:
        raise errors.InvalidArgument(f"template name must be a non-empty string, not {name!r}")
    data = template.get("data")
    data_text = dumps({} if data is None else data, f"data of job scheduler {scheduler_id!r}")
    raw_opts = check.mapping(template.get("opts"), "template.opts")
    check.known_keys(raw_opts, job_options.KNOWN, "template.opts")
    for key, why in _REFUSED_TEMPLATE_OPTS.items():
        if raw_opts.get(key) is not None:
            raise errors.InvalidArgument(f"template opts may not set {key!r}: {why}")
    merged = job_options.merge(defaults, raw_opts)
    for key in _UNDEDUPLICATED:
        if merged.get(key) is not None:
            raise errors.InvalidArgument(
                f"template opts may not set {key!r} (nor may the queue's "
                "default_job_options, which the template takes): a scheduler's runs are "
                "never deduplicated (BullMQ's scheduler templates leave it out)")
    opts = job_options.encode(merged, arg="template.opts")
    job_options.check_size(opts, data_text, f"job scheduler {scheduler_id!r}")
    if merged.get("attempts") is None:
        opts.pop("attempts", None)  # stored as BullMQ stores an unset option: absent
    return name, data_text, opts


# -- operations --------------------------------------------------------------

def upsert(queue: "Queue", scheduler_id: str, *, every: Optional[Seconds] = None,
           pattern: Optional[str] = None, tz: Optional[str] = None,
           start_date: Optional[DateLike] = None, end_date: Optional[DateLike] = None,
           limit: Optional[int] = None,
           template: Optional[Mapping[str, Any]] = None) -> Optional["Job"]:
    """Create or replace a scheduler; returns the job of its next run (``None`` when
    the pattern has no run before ``end_date``). Every check happens before any write."""
    from .job import Job

    if not isinstance(scheduler_id, str) or not scheduler_id:
        raise errors.InvalidArgument(
            f"scheduler_id must be a non-empty string, not {scheduler_id!r}")
    if (every is None) == (pattern is None):
        raise errors.InvalidArgument("give exactly one of every (seconds) or pattern (cron)")
    fields: Dict[str, Any] = {}
    repeat: Dict[str, Any] = {}
    if every is not None:
        fields["every"] = repeat["every"] = _every_ms(every)
    else:
        fields["pattern"] = repeat["pattern"] = validate_pattern(pattern)
    if tz is not None:
        check.string(tz, "tz")
        _zone(tz)
        fields["tz"] = repeat["tz"] = tz
    start_ms = _date_ms(start_date, "start_date")
    end_ms = _date_ms(end_date, "end_date")
    now = now_ms()
    if end_ms is not None and end_ms < now:
        raise errors.InvalidArgument("end_date must be in the future")
    if start_ms is not None and end_ms is not None and end_ms < start_ms:
        raise errors.InvalidArgument("end_date must not be before start_date")
    if start_ms is not None:
        fields["startDate"] = repeat["startDate"] = start_ms
    if end_ms is not None:
        fields["endDate"] = repeat["endDate"] = end_ms
    if limit is not None:
        check.integer(limit, "limit", minimum=1)
        fields["limit"] = repeat["limit"] = limit
    name, data_text, template_opts = _template(scheduler_id, template,
                                               getattr(queue, "default_job_options", {}))
    fields["name"] = name
    next_millis: Any = ""
    if pattern is not None:
        next_millis = cron_next_millis(fields["pattern"], now, tz=tz, start_date=start_ms,
                                       end_date=end_ms)
        if next_millis is None:
            return None
        next_millis = max(next_millis, now)
    repeat["count"] = 1
    job_opts = dict(template_opts, repeat=repeat)
    k = queue.keys
    reply = queue.scripts.run(
        "addJobScheduler", [k.repeat, k.meta, k.id, k.events],
        [k.base, scheduler_id, script_json(fields), next_millis, data_text,
         script_json(template_opts), script_json(job_opts), now])
    if isinstance(reply, int):
        reasons = {-10: "the job of its next run exists from an earlier series (remove it first)",
                   -11: "every slot of its next runs is taken by an existing job"}
        raise errors.ScriptError(f"could not upsert job scheduler {scheduler_id!r}: "
                                 f"{reasons.get(reply, reply)}", reply)
    job_id, delay = str(reply[0]), int(reply[1])
    stored = dict(job_opts, jobId=job_id, delay=delay, timestamp=now,
                  repeatJobKey=scheduler_id)
    job = Job(queue, job_id, name, loads(data_text, {}), stored, now)
    job.repeat_job_key = scheduler_id
    job.delay = delay
    return job


def get(queue: "Queue", scheduler_id: str) -> Optional[JobSchedulerInfo]:
    check.string(scheduler_id, "scheduler_id")
    pipe = queue.client.pipeline(transaction=True)
    pipe.zscore(queue.keys.repeat, scheduler_id)
    pipe.hgetall(f"{queue.keys.repeat}:{scheduler_id}")
    score, fields = pipe.execute()
    if score is None:
        return None
    return JobSchedulerInfo.from_hash(scheduler_id, fields or {}, int(score))


def repeat_entries(queue: "Queue", start: int = 0, end: int = -1,
                   asc: bool = False) -> List["tuple[str, int, Dict[str, str]]"]:
    """``(key, next run ms, its hash)`` of the repeat zset's ranks ``start``..``end``
    (latest run first unless ``asc``): job schedulers and legacy repeatable jobs alike."""
    check.integer(start, "start")
    check.integer(end, "end")
    check.boolean(asc, "asc")
    repeat = queue.keys.repeat
    if asc:
        entries: Any = queue.client.zrange(repeat, start, end, withscores=True)
    else:
        entries = queue.client.zrevrange(repeat, start, end, withscores=True)
    if not entries:
        return []
    pipe = queue.client.pipeline(transaction=False)
    for key, _ in entries:
        pipe.hgetall(f"{repeat}:{key}")
    return [(key, int(score), fields or {}) for (key, score), fields in zip(entries, pipe.execute())]


def list_all(queue: "Queue", start: int = 0, end: int = -1,
             asc: bool = False) -> List[JobSchedulerInfo]:
    return [JobSchedulerInfo.from_hash(key, fields, score)
            for key, score, fields in repeat_entries(queue, start, end, asc)]


def remove(queue: "Queue", scheduler_id: str) -> bool:
    check.string(scheduler_id, "scheduler_id")
    k = queue.keys
    return bool(queue.scripts.run("removeJobScheduler", [k.repeat, k.events],
                                  [k.base, scheduler_id]))


# -- the worker hook -----------------------------------------------------------

def schedule_next(job: "Job") -> Optional[str]:
    """Called by a worker as it starts a job: when the job is a scheduler's run,
    schedule the next run. Returns the new job's id, or ``None``. Never raises:
    an error is logged and reported to the worker's ``error`` listeners, and the
    job runs anyway."""
    scheduler_id = job.repeat_job_key
    if not scheduler_id:
        return None
    try:
        return _schedule_next(job, scheduler_id)
    except Exception as exc:  # noqa: BLE001 - must not keep the job from running
        log.warning("could not schedule the run after job %s of scheduler %r: %s",
                    job.id, scheduler_id, exc)
        worker = getattr(job, "_worker", None)
        if worker is not None:
            worker._emit("error", errors.OrijsError(
                f"could not schedule the next run of job scheduler {scheduler_id!r}: {exc}"))
        return None


def _schedule_next(job: "Job", scheduler_id: str) -> Optional[str]:
    queue = job.queue
    k = queue.keys
    if len(scheduler_id.split(":")) >= _LEGACY_SEGMENTS \
            and not queue.client.hexists(f"{k.repeat}:{scheduler_id}", "ic"):
        log.warning("job %s is a run of repeatable job %r, stored by BullMQ 3 or older: "
                    "orijs_sync does not add its next run (a Node worker would); move it "
                    "to a job scheduler", job.id, scheduler_id)
        return None
    repeat = dict(job.opts.get("repeat") or {})
    count = int(repeat.get("count") or 0) + 1
    limit = repeat.get("limit")
    if limit is not None and count > int(limit):
        return None
    now = now_ms()
    end_date = repeat.get("endDate")
    if end_date and now > int(end_date):
        return None
    next_millis: Any = ""
    if repeat.get("pattern"):
        # A run never precedes the one that produced it, whatever the clocks say.
        after = max(now, int(job.opts.get("prevMillis") or 0))
        millis = cron_next_millis(repeat["pattern"], after, tz=repeat.get("tz"),
                                  start_date=repeat.get("startDate"),
                                  end_date=int(end_date) if end_date else None)
        if millis is None:
            return None
        next_millis = max(millis, after)
    repeat["count"] = count
    opts = {key: value for key, value in job.opts.items()
            if key not in ("jobId", "delay", "timestamp", "prevMillis")}
    opts["repeat"] = repeat
    reply = queue.scripts.run(
        "updateJobScheduler", [k.repeat, k.meta, k.id, k.events],
        [k.base, scheduler_id, job.id, next_millis, script_json(opts), now])
    return str(reply) if reply else None
