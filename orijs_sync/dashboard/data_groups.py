"""What the dashboard shows of group queues (GroupMQ 1.1's layout, ``groupmq:{name}:...``):
pure reads, bounded, returning plain data.

A queue is found by its ``groups`` set or its ``processing``, ``delayed``, ``completed``
or ``failed`` zsets (SCAN, at most ``scan_limit`` keys looked at). A group is **stuck**
when nothing will run its jobs without a recovery pass:

- ``lock expired``: its active job's processing deadline has passed (the worker that took
  it died or hangs); a worker's stalled check gives it back, and none has yet;
- ``not ready``: it holds a waiting job that can run now (not delayed), no live active
  job, and it is not in the ``ready`` zset, so no worker's reserve will look at it (until
  ``recover_delayed_groups`` or GroupMQ's recovery puts it back);
- ``orphaned slot``: its ``active`` list names a job that is not being processed; a reserve
  clears that, but only once the group is in ``ready``.

A paused queue's groups are not stuck: they wait for ``resume``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..base.util import stored_int
from ..groups.job import GroupJob
from .data_scan import SCAN_LIMIT, scan_names

PREFIX = "groupmq:"
MARKERS = ("groups", "processing", "delayed", "completed", "failed")


@dataclass
class GroupState:
    """One group: its waiting jobs in order (the first ``max_jobs``), the running job."""

    id: str
    waiting: List[GroupJob]
    waiting_count: int
    active: Optional[GroupJob] = None
    active_deadline: Optional[int] = None
    ready: bool = False
    stuck: Optional[str] = None


@dataclass
class GroupQueueState:
    """A group queue as read at ``now`` (Redis time, ms)."""

    name: str
    now: int
    paused: bool
    counts: Dict[str, int]
    groups: List[GroupState] = field(default_factory=list)
    groups_total: int = 0
    completed: List[GroupJob] = field(default_factory=list)
    failed: List[GroupJob] = field(default_factory=list)

    @property
    def stuck(self) -> List[GroupState]:
        return [g for g in self.groups if g.stuck]


def list_group_queues(client: Any, *, scan_limit: int = SCAN_LIMIT) -> Tuple[List[str], bool]:
    """The names of the group queues found, sorted, and whether the scan stopped at
    ``scan_limit`` keys (more queues may exist then)."""
    return scan_names(client, PREFIX + "*", queue_name_of, scan_limit=scan_limit)


def queue_name_of(key: str) -> Optional[str]:
    """``groupmq:{name}:groups`` (or another marker key) -> ``name``; else ``None``."""
    if not key.startswith(PREFIX):
        return None
    name, _, suffix = key[len(PREFIX):].rpartition(":")
    if suffix not in MARKERS or not name or ":g:" in f":{name}:" or ":job:" in f":{name}:":
        return None
    return name


def redis_now_ms(client: Any) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def read_group_queue(client: Any, name: str, *, max_groups: int = 200, max_jobs: int = 20,
                     max_finished: int = 20) -> GroupQueueState:
    """The queue's counts, up to ``max_groups`` groups (stuck ones first, then by id) with
    their first ``max_jobs`` waiting jobs, and its newest finished jobs. A fixed number of
    round trips, whatever the number of groups and jobs."""
    ns = PREFIX + name
    pipe = client.pipeline(transaction=False)
    for part in ("processing", "delayed", "completed", "failed", "stage"):
        pipe.zcard(f"{ns}:{part}")
    pipe.exists(f"{ns}:paused")
    pipe.scard(f"{ns}:groups")
    pipe.zrange(f"{ns}:processing", 0, max_groups - 1)
    active, delayed, completed, failed, staged, paused, total, processing = pipe.execute()
    gids = _group_ids(client, ns, max_groups)
    running = _pipelined(client, [("hget", f"{ns}:processing:{jid}", "groupId")
                                  for jid in processing])
    for gid in running:        # a group whose only job runs is shown too
        if gid and gid not in gids and len(gids) < max_groups:
            gids.append(gid)
    now = redis_now_ms(client)
    groups = _groups(client, ns, gids, now, max_jobs, bool(paused))
    groups.sort(key=lambda g: (g.stuck is None, g.id))
    counts = {"active": active, "waiting": sum(g.waiting_count for g in groups),
              "delayed": delayed, "completed": completed, "failed": failed,
              "staged": staged, "groups": total}
    return GroupQueueState(name=name, now=now, paused=bool(paused), counts=counts,
                           groups=groups, groups_total=int(total),
                           completed=_finished(client, ns, "completed", max_finished),
                           failed=_finished(client, ns, "failed", max_finished))


def read_group_job(client: Any, name: str, job_id: str) -> Optional[GroupJob]:
    """One job of the queue with its stored state, or ``None``."""
    raw = client.hgetall(f"{PREFIX}{name}:job:{job_id}")
    if not raw:
        return None
    return GroupJob.from_hash(job_id, raw, _status(raw), None)


def _status(raw: Dict[str, str]) -> str:
    status = raw.get("status") or "unknown"
    return "active" if status == "processing" else status


def _group_ids(client: Any, ns: str, limit: int) -> List[str]:
    found: List[str] = []
    cursor = 0
    while len(found) < limit:
        cursor, page = client.sscan(f"{ns}:groups", cursor, count=500)
        found.extend(page)
        if not cursor:
            break
    return sorted(set(found))[:limit]


def _pipelined(client: Any, calls: List[Tuple[Any, ...]]) -> List[Any]:
    """The replies of ``(method, *args)`` calls sent in one pipeline."""
    if not calls:
        return []
    pipe = client.pipeline(transaction=False)
    for method, *args in calls:
        getattr(pipe, method)(*args)
    return list(pipe.execute())


def _jobs(client: Any, ns: str, ids: List[str]) -> List[GroupJob]:
    raws = _pipelined(client, [("hgetall", f"{ns}:job:{jid}") for jid in ids])
    return [GroupJob.from_hash(jid, raw, _status(raw), None)
            for jid, raw in zip(ids, raws) if raw]


def _finished(client: Any, ns: str, status: str, limit: int) -> List[GroupJob]:
    ids = client.zrange(f"{ns}:{status}", 0, limit - 1, desc=True) if limit else []
    return _jobs(client, ns, list(ids))


def _groups(client: Any, ns: str, gids: List[str], now: int, max_jobs: int,
            paused: bool) -> List[GroupState]:
    """Every group's state in four round trips: its keys, its active ids' deadlines, the
    jobs' hashes (the head is read even with ``max_jobs`` 0: the stuck check needs it)."""
    calls: List[Tuple[Any, ...]] = []
    for gid in gids:
        gkey = f"{ns}:g:{gid}"
        calls += [("zrange", gkey, 0, max(max_jobs, 1) - 1), ("zcard", gkey),
                  ("lrange", f"{gkey}:active", 0, -1), ("zscore", f"{ns}:ready", gid)]
    replies = _pipelined(client, calls)
    per_group = [replies[i:i + 4] for i in range(0, len(replies), 4)]
    active_ids = [jid for _, _, ids, _ in per_group for jid in ids]
    deadlines = dict(zip(active_ids, _pipelined(
        client, [("zscore", f"{ns}:processing", jid) for jid in active_ids])))
    live = [jid for jid in active_ids if deadlines[jid] is not None]
    jobs = {job.id: job for job in _jobs(
        client, ns, [jid for waiting, *_ in per_group for jid in waiting] + live)}
    return [_group(gid, reply, deadlines, jobs, now, max_jobs, paused)
            for gid, reply in zip(gids, per_group)]


def _group(gid: str, reply: List[Any], deadlines: Dict[str, Any], jobs: Dict[str, GroupJob],
           now: int, max_jobs: int, paused: bool) -> GroupState:
    waiting_ids, count, active_ids, ready = reply
    waiting = [jobs[jid] for jid in waiting_ids if jid in jobs]
    state = GroupState(id=gid, waiting=waiting, waiting_count=int(count),
                       ready=ready is not None)
    orphans = [jid for jid in active_ids if deadlines.get(jid) is None]
    for jid in active_ids:
        if deadlines.get(jid) is not None:
            state.active_deadline = stored_int(deadlines[jid], 0)
            state.active = jobs.get(jid)
            if state.active is not None:
                state.active.deadline_at = state.active_deadline
    if not paused:
        state.stuck = _stuck_reason(state, orphans, now)
    state.waiting = waiting[:max_jobs]     # the head was read for the check above
    return state


def _stuck_reason(state: GroupState, orphans: List[str], now: int) -> Optional[str]:
    if state.active_deadline is not None:
        if state.active_deadline < now:
            late = (now - state.active_deadline) / 1000.0
            return f"lock expired: its active job's deadline passed {late:.1f} s ago"
        return None
    runnable = bool(state.waiting) and state.waiting[0].status == "waiting"
    if runnable and not state.ready:
        if orphans:
            return (f"orphaned slot: active list names {', '.join(orphans)}, not processing, "
                    f"and the group is not in ready")
        return "not ready: it holds a runnable job but no worker will look at it"
    return None
