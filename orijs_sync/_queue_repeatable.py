"""Legacy repeatable jobs (BullMQ's deprecated ``opts.repeat``): listed and removed.

Node services on BullMQ 5 may still add jobs with ``opts.repeat``. BullMQ keeps such
a series under an md5 of its options joined (``name:jobId:endDate:tz:pattern|every``)
in the same ``repeat`` zset as job schedulers, its settings in the hash
``repeat:<key>``, and its next run as the delayed job ``repeat:<key>:<run ms>``;
series stored by BullMQ 3 and older sit in the zset under the joined options
themselves. Python lists them and removes them as BullMQ's ``getRepeatableJobs``,
``removeRepeatable`` and ``removeRepeatableByKey`` do. Python does not add them:
BullMQ deprecates ``opts.repeat`` for job schedulers (``upsert_job_scheduler``),
which Node and Python both run.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional

from .base import validate as check
from .base.util import stored_int
from .job_scheduler import _date_ms, _every_ms, repeat_entries

REPEAT_OPTS = ("pattern", "every", "tz", "end_date", "key")


@dataclass(frozen=True)
class RepeatableJob:
    """One entry of the repeat zset as BullMQ's ``getRepeatableJobs`` gives it: ``key``
    (what ``remove_repeatable_by_key`` takes), ``next`` and ``end_date`` in ms
    since the epoch, ``every`` in seconds; ``id`` is the custom job id a BullMQ 3 key
    carries."""

    key: str
    name: Optional[str]
    next: Optional[int] = None
    id: Optional[str] = None
    end_date: Optional[int] = None
    tz: Optional[str] = None
    pattern: Optional[str] = None
    every: Optional[float] = None

    @classmethod
    def from_entry(cls, key: str, next_millis: int, fields: Mapping[str, str]) -> "RepeatableJob":
        if not fields:      # a BullMQ 3 key: the settings are the key's parts
            parts = key.split(":")
            parts += [""] * (5 - len(parts))
            return cls(key=key, name=parts[0], next=next_millis, id=parts[1] or None,
                       end_date=stored_int(parts[2]) or None, tz=parts[3] or None,
                       pattern=":".join(parts[4:]) or None)
        every = stored_int(fields.get("every"))
        return cls(key=key, name=fields.get("name"), next=next_millis,
                   end_date=stored_int(fields.get("endDate")) or None,
                   tz=fields.get("tz") or None, pattern=fields.get("pattern") or None,
                   every=None if not every else every / 1000.0)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def _joined_options(name: str, repeat_opts: Mapping[str, Any], job_id: Optional[str]) -> str:
    """BullMQ's ``getRepeatConcatOptions``: the series' options joined, checked first."""
    opts = check.mapping(repeat_opts, "repeat_opts", allow_none=False)
    check.known_keys(opts, REPEAT_OPTS, "repeat_opts")
    pattern = check.optional_string(opts.get("pattern"), "repeat_opts.pattern")
    every = None if opts.get("every") is None else _every_ms(opts["every"])
    if pattern is None and every is None and opts.get("key") is None:
        check.bad_value("repeat_opts", opts, "needs the 'pattern' or 'every' the job was "
                                             "added with (or its 'key')")
    end_date = _date_ms(opts.get("end_date"), "repeat_opts.end_date")
    tz = check.optional_string(opts.get("tz"), "repeat_opts.tz") or ""
    suffix = pattern or ("undefined" if every is None else str(every))
    return f"{name}:{job_id or ''}:{end_date or ''}:{tz}:{suffix}"


class RepeatableQueueMixin:
    """Mixed into ``orijs_sync.queue.Queue``."""

    keys: Any
    scripts: Any

    def get_repeatable_jobs(self, start: int = 0, end: int = -1,
                            asc: bool = False) -> List[RepeatableJob]:
        """Repeatable jobs by next run, latest first unless ``asc``, ranks ``start``..``end``
        (BullMQ's deprecated ``getRepeatableJobs``). Job schedulers share BullMQ's repeat
        key, so they are listed too, as Node lists them."""
        return [RepeatableJob.from_entry(key, score, fields)
                for key, score, fields in repeat_entries(self, start, end, asc)]  # type: ignore[arg-type]

    def remove_repeatable(self, name: str, repeat_opts: Mapping[str, Any],
                          job_id: Optional[str] = None) -> bool:
        """Remove the legacy repeatable job that a Node service added as ``name`` with
        ``opts.repeat`` (BullMQ's deprecated ``removeRepeatable``), and its next run
        while delayed. ``repeat_opts`` are the options it was added with, in Python
        spelling: ``pattern`` or ``every`` (seconds), ``tz``, ``end_date`` (datetime or
        ms), or its custom ``key``; ``job_id`` the custom job id it was added with.
        Returns whether it existed."""
        check.string(name, "name", non_empty=False)
        if job_id is not None:
            check.string(job_id, "job_id")
        joined = _joined_options(name, repeat_opts, job_id)
        custom_key = check.optional_string(repeat_opts.get("key"), "repeat_opts.key")
        repeat_key = custom_key or _md5(joined)
        legacy_run = custom_key or _md5(f"{name}{job_id or ''}{_md5(joined)}")
        return self._remove_repeatable(f"repeat:{legacy_run}:", joined, repeat_key)

    def remove_repeatable_by_key(self, key: str) -> bool:
        """Remove a repeatable job by the ``key`` ``get_repeatable_jobs`` gives
        (BullMQ's deprecated ``removeRepeatableByKey``), and its next run while delayed
        (as BullMQ, not the next run of a series stored by BullMQ 3, whose key holds its
        options: that run is left to run once). Returns whether it existed."""
        check.string(key, "key")
        parts = key.split(":")
        job_id = parts[1] if len(parts) > 1 else ""
        legacy_run = _md5(f"{parts[0]}{job_id}{_md5(key)}")
        return self._remove_repeatable(f"repeat:{legacy_run}:", "", key)

    def _remove_repeatable(self, legacy_run_prefix: str, legacy_key: str, key: str) -> bool:
        k = self.keys
        return bool(self.scripts.run("removeRepeatable", [k.repeat, k.delayed, k.events],
                                     [legacy_run_prefix, legacy_key, key, k.base]))
