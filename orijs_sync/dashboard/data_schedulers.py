"""What the dashboard shows of a BullMQ queue's job schedulers: pure reads, bounded.

A scheduler's runs are jobs with the id ``repeat:<scheduler id>:<run ms>``; its latest
runs are found among the newest ``window`` ids of each state (the lists and zsets of the
queue), so a run older than that window is not shown.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from ..job_scheduler import JobSchedulerInfo
from ..keys import QueueKeys
from .data_scan import bullmq_queues

WINDOW = 500
LISTS = ("active", "wait", "paused")
ZSETS = ("delayed", "prioritized", "waiting-children", "completed", "failed")
STATE_OF = {"wait": "waiting", "paused": "waiting", "prioritized": "waiting"}


@dataclass
class SchedulerRun:
    """One job a scheduler produced: its id, run time (ms) and state."""

    id: str
    run_at: int
    state: str


@dataclass
class SchedulerState:
    info: JobSchedulerInfo
    runs: List[SchedulerRun] = field(default_factory=list)

    @property
    def next_run(self) -> Optional[datetime]:
        """The next run as an aware UTC datetime."""
        if self.info.next is None:
            return None
        return datetime.fromtimestamp(self.info.next / 1000.0, tz=timezone.utc)


def scheduler_queues(client: Any, prefix: str) -> Tuple[List[str], bool]:
    """The queues holding job schedulers (a ``repeat`` zset), bounded scan."""
    return bullmq_queues(client, prefix, suffixes=("repeat",))


def read_schedulers(client: Any, prefix: str, queue: str, *, limit: int = 100,
                    runs: int = 5, window: int = WINDOW) -> List[SchedulerState]:
    """Up to ``limit`` schedulers of the queue, soonest next run first, each with its
    latest ``runs`` jobs (newest first) among the newest ``window`` ids of each state."""
    keys = QueueKeys(prefix, queue)
    entries = client.zrange(keys.repeat, 0, limit - 1, withscores=True)
    pipe = client.pipeline(transaction=False)
    for sid, _ in entries:
        pipe.hgetall(f"{keys.repeat}:{sid}")
    infos = [JobSchedulerInfo.from_hash(sid, fields or {}, int(score))
             for (sid, score), fields in zip(entries, pipe.execute())]
    recent = _recent_ids(client, keys, window)
    return [SchedulerState(info, _runs_of(info.id, recent, runs)) for info in infos]


def _recent_ids(client: Any, keys: QueueKeys, window: int) -> List[Tuple[str, str]]:
    """(job id, state) of the newest ``window`` ids of every state."""
    pipe = client.pipeline(transaction=False)
    for name in LISTS:
        pipe.lrange(keys.key(name), 0, window - 1)
    for name in ZSETS:
        pipe.zrange(keys.key(name), 0, window - 1, desc=True)
    replies = pipe.execute()
    found: List[Tuple[str, str]] = []
    for name, ids in zip(LISTS + ZSETS, replies):
        found.extend((str(jid), STATE_OF.get(name, name)) for jid in ids)
    return found


def _runs_of(scheduler_id: str, recent: List[Tuple[str, str]], limit: int) -> List[SchedulerRun]:
    head = f"repeat:{scheduler_id}:"
    runs: Dict[str, SchedulerRun] = {}
    for jid, state in recent:
        millis = jid[len(head):] if jid.startswith(head) else ""
        if millis.isdigit() and jid not in runs:
            runs[jid] = SchedulerRun(jid, int(millis), state)
    return sorted(runs.values(), key=lambda r: r.run_at, reverse=True)[:limit]
