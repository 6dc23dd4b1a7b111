"""Queue getters after BullMQ's ``QueueGetters``: counts per state and per priority,
job id ranges, the queue's meta hash, and the job holding a deduplication id.

Each read of several keys is one ``MULTI`` (one snapshot), as BullMQ's scripts read
them; the keys of one queue share a hash slot on a cluster (``check_queue``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Union

from ._queue_control import LIST_STATES, list_slice
from .base import validate as check
from .base.util import stored_int

if TYPE_CHECKING:  # pragma: no cover
    from .job import Job

# Every state's key, as BullMQ's getJobCounts lists them when none is named.
ALL_COUNT_TYPES = ("active", "completed", "delayed", "failed", "paused", "prioritized",
                   "waiting", "waiting-children")
# What getJobCounts and getRanges may name: a state, its key's name ("wait") or the
# repeat zset.
TYPE_NAMES = frozenset(ALL_COUNT_TYPES) | {"wait", "repeat"}
PRIORITY_SPAN = 0x100000000   # a prioritized job's score: priority * 2**32 + a counter
_META_NUMBERS = {"concurrency": "concurrency", "max": "max", "opts.maxLenEvents": "max_len_events"}


@dataclass(frozen=True)
class QueueMeta:
    """The queue's settings as its meta hash holds them (BullMQ's ``getMeta()``):
    ``duration`` (the global rate limit's window) in seconds, ``max_len_events`` the
    events stream's length kept (about), ``version`` the last Node ``Queue``'s library
    (``"bullmq:5.81.5"``); ``other`` holds the fields BullMQ does not name."""

    paused: bool = False
    concurrency: Optional[int] = None
    max: Optional[int] = None
    duration: Optional[float] = None
    max_len_events: Optional[int] = None
    version: Optional[str] = None
    other: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_hash(cls, fields: Dict[str, str]) -> "QueueMeta":
        rest = dict(fields)
        numbers = {name: stored_int(rest.pop(stored, None)) for stored, name in _META_NUMBERS.items()}
        duration = stored_int(rest.pop("duration", None))
        return cls(paused=rest.pop("paused", None) == "1",
                   duration=None if duration is None else duration / 1000.0,
                   version=rest.pop("version", None), other=rest, **numbers)


def _types(types: Union[str, Sequence[str]], valid: Iterable[str]) -> List[str]:
    """Named types, each once, in the order given."""
    return list(dict.fromkeys(check.states(types, "types", frozenset(valid))))


class QueueGettersMixin:
    """Mixed into ``orijs_sync.queue.Queue`` (which provides keys, client, get_jobs
    and get_job_counts)."""

    keys: Any
    client: Any
    name: str

    if TYPE_CHECKING:  # pragma: no cover - Queue's
        def get_jobs(self, states: Union[str, Sequence[str], None] = None, start: int = 0,
                     end: int = -1, asc: bool = False) -> List["Job"]: ...

        def get_job_counts(self, *types: str) -> Dict[str, int]: ...

    # -- counts -------------------------------------------------------------
    def get_job_count_by_types(self, *types: str) -> int:
        """The number of jobs in all the states named (every state when none is), as
        BullMQ's ``getJobCountByTypes``: ``"waiting"`` counts the paused list too,
        ``"wait"`` the wait list alone."""
        wanted = _types(list(types), TYPE_NAMES) or list(ALL_COUNT_TYPES)
        return sum(self.get_job_counts(*wanted).values())

    def get_waiting_count(self) -> int:
        """Jobs waiting to be taken: the wait list, or the paused one (BullMQ counts both)."""
        return self.get_job_count_by_types("waiting")

    def get_active_count(self) -> int:
        """Jobs being processed."""
        return self.get_job_count_by_types("active")

    def get_delayed_count(self) -> int:
        """Delayed jobs."""
        return self.get_job_count_by_types("delayed")

    def get_prioritized_count(self) -> int:
        """Jobs waiting with a priority."""
        return self.get_job_count_by_types("prioritized")

    def get_completed_count(self) -> int:
        """Completed jobs kept."""
        return self.get_job_count_by_types("completed")

    def get_failed_count(self) -> int:
        """Failed jobs kept."""
        return self.get_job_count_by_types("failed")

    def get_waiting_children_count(self) -> int:
        """Parents waiting for their children."""
        return self.get_job_count_by_types("waiting-children")

    def get_waiting_children(self, start: int = 0, end: int = -1) -> List["Job"]:
        """Parents waiting for their children, oldest first; ``start``/``end`` are ranks."""
        return self.get_jobs(["waiting-children"], start, end, asc=True)

    def get_counts_per_priority(self, priorities: Iterable[int]) -> Dict[int, int]:
        """``{priority: jobs}`` for each priority named (BullMQ's ``getCountsPerPriority``):
        priority 0 counts the jobs waiting without one (the paused list when the queue
        is paused), any other the prioritized jobs of exactly that priority."""
        if isinstance(priorities, (str, bytes)) or not isinstance(priorities, Iterable):
            check.bad_type("priorities", priorities, "a list of priorities")
        wanted = list(dict.fromkeys(
            check.integer(p, "priorities", minimum=0, maximum=check.MAX_PRIORITY)
            for p in priorities))
        k = self.keys
        pipe = self.client.pipeline(transaction=True)
        pipe.hexists(k.meta, "paused")
        pipe.llen(k.wait)
        pipe.llen(k.paused)
        for priority in (p for p in wanted if p):
            pipe.zcount(k.prioritized, priority * PRIORITY_SPAN,
                        (priority + 1) * PRIORITY_SPAN - 1)
        paused, waiting, held, *counts = pipe.execute()
        by_priority = iter(counts)
        return {p: int(held if paused else waiting) if p == 0 else int(next(by_priority))
                for p in wanted}

    # -- ranges -------------------------------------------------------------
    def get_ranges(self, types: Union[str, Sequence[str]], start: int = 0, end: int = 1,
                   asc: bool = False) -> List[str]:
        """Job ids of the given states, each state's ranks ``start``..``end`` in turn,
        newest first unless ``asc``; an id listed twice is kept once. As BullMQ's
        ``getRanges`` (its defaults too: ranks 0 and 1); ``"waiting"`` (or ``"wait"``)
        reads the wait list only and ``"repeat"`` the repeatable jobs' keys."""
        wanted = _types(types, TYPE_NAMES)
        check.integer(start, "start", minimum=-check.MAX_INT)
        check.integer(end, "end", minimum=-check.MAX_INT)
        check.boolean(asc, "asc")
        pipe = self.client.pipeline(transaction=True)
        for kind in wanted:
            key = self.keys.key("wait" if kind == "waiting" else kind)
            if kind in LIST_STATES or kind == "waiting":
                pipe.lrange(key, *list_slice(start, end, asc))
            else:
                (pipe.zrange if asc else pipe.zrevrange)(key, start, end)
        ids: Dict[str, None] = {}
        for kind, found in zip(wanted, pipe.execute()):
            reverse = asc and (kind in LIST_STATES or kind == "waiting")
            ids.update(dict.fromkeys(reversed(found) if reverse else found))
        return list(ids)

    # -- the meta hash ------------------------------------------------------
    def get_meta(self) -> QueueMeta:
        """The queue's settings from its meta hash (BullMQ's ``getMeta``)."""
        return QueueMeta.from_hash(self.client.hgetall(self.keys.meta))

    def get_version(self) -> Optional[str]:
        """The library the last Node ``Queue`` of this queue ran (``"bullmq:5.81.5"``),
        as BullMQ's ``getVersion``; None when no Node queue wrote it (orijs_sync does not)."""
        version = self.client.hget(self.keys.meta, "version")
        return None if version is None else str(version)

    def is_maxed(self) -> bool:
        """Whether the queue runs as many jobs as its global concurrency allows (BullMQ's
        ``isMaxed``): False when none is set."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(self.keys.meta, "concurrency")
        pipe.llen(self.keys.active)
        concurrency, active = pipe.execute()
        limit = stored_int(concurrency)
        return limit is not None and int(active) >= limit

    # -- deduplication --------------------------------------------------------
    def get_deduplication_job_id(self, deduplication_id: str) -> Optional[str]:
        """The id of the job that holds ``deduplication_id`` (an add with the same id
        is deduplicated to it), or None (BullMQ's ``getDeduplicationJobId``)."""
        check.string(deduplication_id, "deduplication_id")
        job_id = self.client.get(f"{self.keys.base}de:{deduplication_id}")
        return None if job_id is None else str(job_id)
