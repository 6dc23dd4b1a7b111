"""GroupMQ's ``getJobsByStatus``: jobs of several states in one list, paged.

The list is GroupMQ's: active jobs (by deadline), delayed (soonest due first),
completed and failed (newest first), then waiting jobs group by group, each group in
its order; whatever order the states are asked in. A job is listed once, under its
first state (a delayed job held in its group is delayed, not waiting). Each set is read
only as far as the page needs, in chunks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple

from . import _options as opt
from .job import GroupJob

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue

ORDER = ("active", "delayed", "completed", "failed", "waiting")
SETS = {"active": ("processing", False), "delayed": ("delayed", False),
        "completed": ("completed", True), "failed": ("failed", True)}
CHUNK = 500


def check(statuses: Any, start: Any, end: Any) -> Tuple[List[str], int, int]:
    """The states (in GroupMQ's order), ``start`` and ``end``, or a clear error."""
    if isinstance(statuses, (str, bytes)) or not isinstance(statuses, (list, tuple, set,
                                                                       frozenset)):
        raise opt.GroupOptionError(f"statuses must be a list of states such as "
                                   f"['waiting', 'active'], not {statuses!r}")
    unknown = [s for s in statuses if s not in ORDER]
    if unknown or not statuses:
        raise opt.GroupOptionError(f"statuses must be one or more of {ORDER}, not "
                                   f"{list(statuses)!r}")
    start = opt.count(start, "start")
    if isinstance(end, bool) or not isinstance(end, int) or end < -1:
        raise opt.GroupOptionError(f"end must be an integer >= -1 (-1: to the end), not "
                                   f"{end!r}")
    if end != -1 and end < start:
        raise opt.GroupOptionError(f"end ({end}) must be >= start ({start}), or -1")
    return [s for s in ORDER if s in statuses], start, end


def _chunks(queue: "GroupQueue", key: str, desc: bool) -> Iterator[str]:
    """The ids of one sorted set, in order, read ``CHUNK`` at a time."""
    offset = 0
    while True:
        ids = queue.client.zrange(key, offset, offset + CHUNK - 1, desc=desc)
        yield from (str(i) for i in ids)
        if len(ids) < CHUNK:
            return
        offset += CHUNK


def _ids(queue: "GroupQueue", status: str) -> Iterator[str]:
    """The ids listed under one state, in GroupMQ's order for it."""
    if status != "waiting":
        name, desc = SETS[status]
        yield from _chunks(queue, queue.key(name), desc)
        return
    for gid in queue.get_unique_groups():
        yield from _chunks(queue, queue.key("g", gid), False)


def _listed(queue: "GroupQueue", states: Sequence[str],
            need: Optional[int]) -> List[Tuple[str, str]]:
    """(id, state) pairs, each id once, up to ``need`` of them (``None``: all)."""
    seen: Dict[str, str] = {}
    for status in states:
        for jid in _ids(queue, status):
            if need is not None and len(seen) >= need:
                return list(seen.items())
            seen.setdefault(jid, status)
    return list(seen.items())


def jobs_by_status(queue: "GroupQueue", statuses: Any, start: Any, end: Any) -> List[GroupJob]:
    """The jobs at positions ``start`` to ``end`` (inclusive; -1: to the end) of the
    list; a job whose hash is gone meanwhile is left out."""
    states, first, last = check(statuses, start, end)
    page = _listed(queue, states, None if last == -1 else last + 1)[first:]
    pipe = queue.client.pipeline(transaction=False)
    for jid, _ in page:
        pipe.hgetall(queue.key("job", jid))
    return [GroupJob.from_hash(jid, raw, status, queue)
            for (jid, status), raw in zip(page, pipe.execute()) if raw]
