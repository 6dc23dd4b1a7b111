"""GroupJob: one job of a group queue, as GroupMQ 1.1 stores it (``job:{id}`` hash)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from .._util import loads


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return default


@dataclass
class GroupJob:
    """A job of a :class:`GroupQueue`. Times are epoch milliseconds, as stored."""

    id: str
    group_id: str
    data: Any
    attempts_made: int = 0
    max_attempts: int = 3
    order_ms: int = 0
    timestamp: int = 0
    status: str = "unknown"
    score: float = 0.0
    deadline_at: Optional[int] = None
    processed_on: Optional[int] = None
    finished_on: Optional[int] = None
    returnvalue: Any = None
    failed_reason: Optional[str] = None
    stacktrace: Optional[str] = None
    raw: Dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_reply(cls, reply: List[Any]) -> "GroupJob":
        """From a reserve reply: id, groupId, data, attempts, maxAttempts, seq,
        timestamp, orderMs, score, deadline."""
        return cls(id=str(reply[0]), group_id=str(reply[1]), data=loads(reply[2]),
                   attempts_made=_int(reply[3]), max_attempts=_int(reply[4], 1),
                   timestamp=_int(reply[6]), order_ms=_int(reply[7]) or _int(reply[6]),
                   score=float(reply[8] or 0), deadline_at=_int(reply[9]), status="active")

    @classmethod
    def from_hash(cls, job_id: str, raw: Mapping[str, str], status: str) -> "GroupJob":
        optional = {name: _int(raw[key]) if raw.get(key) else None
                    for name, key in (("processed_on", "processedOn"),
                                      ("finished_on", "finishedOn"))}
        return cls(id=job_id, group_id=raw.get("groupId", ""), data=loads(raw.get("data")),
                   attempts_made=_int(raw.get("attempts")),
                   max_attempts=_int(raw.get("maxAttempts"), 1),
                   order_ms=_int(raw.get("orderMs")), timestamp=_int(raw.get("timestamp")),
                   status=status, score=float(raw.get("score") or 0),
                   returnvalue=loads(raw.get("returnvalue")),
                   failed_reason=raw.get("failedReason") or raw.get("lastErrorMessage") or None,
                   stacktrace=raw.get("stacktrace") or raw.get("lastErrorStack") or None,
                   raw=dict(raw), **optional)
