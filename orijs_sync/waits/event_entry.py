"""One entry of a queue's events stream, and how a waiter reads an outcome from it."""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from .. import errors
from ..base.util import loads
from .futures import settle

# The field each event carries as its "value" for on(event, fn(job_id, value)).
_VALUE_FIELD = {"completed": "returnvalue", "failed": "failedReason", "progress": "data",
                "delayed": "delay", "active": "prev", "waiting": "prev", "removed": "prev",
                "added": "name", "retries-exhausted": "attemptsMade",
                "deduplicated": "deduplicationId", "debounced": "debounceId",
                "waiting-children": None, "stalled": None,
                "duplicated": None, "drained": None, "paused": None, "resumed": None,
                "cleaned": "count"}
_JSON_FIELDS = {"returnvalue", "data"}


@dataclass
class QueueEvent:
    """One entry of a queue's events stream."""

    queue: str
    event: str
    job_id: Optional[str]
    fields: Dict[str, str] = field(default_factory=dict)
    id: str = ""

    @property
    def value(self) -> Any:
        name = _VALUE_FIELD.get(self.event)
        if name is None:
            return None
        raw = self.fields.get(name)
        return loads(raw) if name in _JSON_FIELDS else raw


UNKNOWN_RUN = (2 ** 63, 0)   # above every stream id


def stream_id(entry_id: str) -> Tuple[int, int]:
    """A stream entry id ``"ms-seq"`` as a comparable pair."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def settle_from_event(fut: "Future[Any]", ev: QueueEvent) -> None:
    if ev.event == "completed":
        settle(fut, result=ev.value)
    else:
        settle(fut, exc=errors.JobFailed(ev.fields.get("failedReason", ""), ev.job_id))
