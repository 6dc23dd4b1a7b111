"""GroupJob: one job of a group queue, as GroupMQ 1.1 stores it (``job:{id}`` hash)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from .. import errors
from ..base.util import Seconds, StoredTimes, loads, stored_int

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue


def _float(value: Any) -> float:
    """A stored score; what is no finite number is 0."""
    try:
        number = float(value or 0)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


@dataclass
class GroupJob(StoredTimes):
    """A job of a ``GroupQueue``. Times are epoch milliseconds, as stored
    (``deadline_at`` too, GroupMQ's name), and aware UTC ``datetime``s as
    ``created_at``, ``processed_at`` and ``finished_at``."""

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
    queue: Optional["GroupQueue"] = field(default=None, repr=False, compare=False)
    # the token of the run (reservation) holding the job, on a worker's jobs
    token: Optional[str] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_reply(cls, reply: List[Any], queue: Optional["GroupQueue"] = None,
                   token: Optional[str] = None) -> "GroupJob":
        """From a reserve reply: id, groupId, data, attempts, maxAttempts, seq,
        timestamp, orderMs, score, deadline; ``token`` is the reservation's."""
        return cls(id=str(reply[0]), group_id=str(reply[1]), data=loads(reply[2]),
                   attempts_made=stored_int(reply[3], 0), max_attempts=stored_int(reply[4], 1),
                   timestamp=stored_int(reply[6], 0),
                   order_ms=stored_int(reply[7], 0) or stored_int(reply[6], 0),
                   score=_float(reply[8]), deadline_at=stored_int(reply[9], 0), status="active",
                   queue=queue, token=token)

    @classmethod
    def from_hash(cls, job_id: str, raw: Mapping[str, str], status: str,
                  queue: Optional["GroupQueue"] = None) -> "GroupJob":
        """A job from its stored hash fields (as ``GroupQueue.get_job`` reads it)."""
        def when(key: str) -> Optional[int]:
            return stored_int(raw[key], 0) if raw.get(key) else None
        return cls(id=job_id, group_id=raw.get("groupId", ""), data=loads(raw.get("data")),
                   attempts_made=stored_int(raw.get("attempts"), 0),
                   max_attempts=stored_int(raw.get("maxAttempts"), 1),
                   order_ms=stored_int(raw.get("orderMs"), 0),
                   timestamp=stored_int(raw.get("timestamp"), 0),
                   status=status, score=_float(raw.get("score")),
                   returnvalue=loads(raw.get("returnvalue")),
                   failed_reason=raw.get("failedReason") or raw.get("lastErrorMessage") or None,
                   stacktrace=raw.get("stacktrace") or raw.get("lastErrorStack") or None,
                   processed_on=when("processedOn"), finished_on=when("finishedOn"),
                   raw=dict(raw), queue=queue)

    # -- GroupMQ's job methods (each the queue call of the same name) --------------------

    def _queue(self) -> "GroupQueue":
        if self.queue is None:
            raise errors.InvalidStateError(f"group job {self.id!r} has no queue to act on")
        return self.queue

    def remove(self) -> bool:
        """``GroupQueue.remove`` of this job."""
        return self._queue().remove(self.id)

    def retry(self) -> None:
        """``GroupQueue.retry`` of this job (a failed job back in its group)."""
        self._queue().retry(self.id)

    def promote(self) -> None:
        """``GroupQueue.promote`` of this job."""
        self._queue().promote(self.id)

    def change_delay(self, seconds: Seconds) -> None:
        """``GroupQueue.change_delay`` of this job."""
        self._queue().change_delay(self.id, seconds)

    def update_data(self, data: Any) -> None:
        """``GroupQueue.update_data`` of this job."""
        self._queue().update_data(self.id, data)
        self.data = data

    def update(self, data: Any) -> None:
        """GroupMQ's name of ``update_data``."""
        self.update_data(data)

    def get_state(self) -> str:
        """``active``, ``waiting``, ``delayed``, ``completed``, ``failed`` (as read now),
        or ``unknown`` when the job is gone."""
        current = self._queue().get_job(self.id)
        return "unknown" if current is None else current.status

    def to_json(self) -> Dict[str, Any]:
        """The job's fields (no queue, no raw hash, no token) as a JSON-ready dict."""
        skip = ("raw", "queue", "token")
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
