"""EventMessage: the envelope an event travels in, exactly as OriJS writes it as job data.

Wire form (job data, JSON)::

    {"version": "1", "eventId": uuid4, "eventName": ..., "payload": ..., "meta": {...},
     "correlationId": uuid4, "causationId"?: ..., "timestamp": ms, "idempotencyKey"?: ...}

``causationId`` and ``idempotencyKey`` are present only when given; ``meta`` is
always a JSON object (``{}`` when empty).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping  # (typing's Mapping makes isinstance 2.5 × slower)
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from .. import errors
from ..base import validate as check
from ..base.util import dumps
from ..options import validate_job_id

EVENT_MESSAGE_VERSION = "1"
EVENT_JOB_NAME = "event"

__all__ = ["EVENT_MESSAGE_VERSION", "EVENT_JOB_NAME", "EventMessage", "validate_event_name",
           "validate_idempotency_key"]


def validate_event_name(event_name: Any) -> str:
    """A non-empty string without ``:`` (it becomes part of a queue name)."""
    return check.name(event_name, "event_name")


def validate_idempotency_key(key: Any) -> Optional[str]:
    """The key becomes the BullMQ job id, so BullMQ's rules for ids apply."""
    return validate_job_id(key, "idempotency_key")


def _json_object(value: Any, what: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise errors.InvalidArgumentType(
            f"{what} must be a JSON object (a dict), not {type(value).__name__}")
    if not value:       # most emits carry no meta: nothing to copy through JSON
        return {}
    for key in value:
        if not isinstance(key, str):
            raise errors.InvalidArgumentType(f"{what} keys must be strings, got {key!r}")
    decoded: Dict[str, Any] = json.loads(dumps(dict(value), what))
    return decoded


def _two_uuid4s() -> Tuple[str, str]:
    """Two random (version 4) UUIDs as text, as ``str(uuid.uuid4())`` writes them, from
    one read of the OS's randomness (an emit makes two; ``uuid4`` took twice as long)."""
    digits = os.urandom(32).hex()
    return _uuid4_text(digits[:32]), _uuid4_text(digits[32:])


def _uuid4_text(h: str) -> str:
    variant = _VARIANT_DIGITS[int(h[16], 16) & 3]      # the RFC 4122 variant: 10xx
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}"


_VARIANT_DIGITS = "89ab"


@dataclass(frozen=True)
class EventMessage:
    """One event: what a handler receives and what is stored as the job's data."""

    event_id: str
    event_name: str
    payload: Any
    correlation_id: str
    timestamp: int
    meta: Dict[str, Any] = field(default_factory=dict)
    causation_id: Optional[str] = None
    idempotency_key: Optional[str] = None
    version: str = EVENT_MESSAGE_VERSION

    @classmethod
    def create(cls, event_name: str, payload: Any = None,
               meta: Optional[Mapping[str, Any]] = None, *,
               causation_id: Optional[str] = None,
               idempotency_key: Optional[str] = None) -> "EventMessage":
        """A new message with fresh ids; refuses data JSON cannot hold (``TypeError``)."""
        validate_event_name(event_name)
        validate_idempotency_key(idempotency_key)
        if causation_id is not None and not isinstance(causation_id, str):
            raise errors.InvalidArgumentType(
                f"causation_id must be a string, not {type(causation_id).__name__}")
        dumps(payload, "payload")
        event_id, correlation_id = _two_uuid4s()
        return cls(event_id=event_id, event_name=event_name, payload=payload,
                   correlation_id=correlation_id, timestamp=int(time.time() * 1000),
                   meta=_json_object(meta, "meta"), causation_id=causation_id,
                   idempotency_key=idempotency_key)

    @property
    def job_id(self) -> str:
        """The BullMQ job id: the idempotency key when given, else the event id."""
        return self.idempotency_key if self.idempotency_key is not None else self.event_id

    def to_dict(self) -> Dict[str, Any]:
        """The wire form (camelCase keys, optional keys only when set)."""
        out: Dict[str, Any] = {"version": self.version, "eventId": self.event_id,
                               "eventName": self.event_name, "payload": self.payload,
                               "meta": self.meta, "correlationId": self.correlation_id}
        if self.causation_id is not None:
            out["causationId"] = self.causation_id
        out["timestamp"] = self.timestamp
        if self.idempotency_key is not None:
            out["idempotencyKey"] = self.idempotency_key
        return out

    def to_json(self) -> str:
        return dumps(self.to_dict(), "event message")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "EventMessage":
        """Read an envelope written by either side; unknown keys are ignored."""
        if not isinstance(data, Mapping):
            raise errors.InvalidArgumentType(
                f"an EventMessage is a JSON object, not {type(data).__name__}")
        missing = [k for k in ("eventId", "eventName") if k not in data]
        if missing:
            raise errors.InvalidArgument(
                f"not an EventMessage envelope: missing {', '.join(missing)}")
        meta = data.get("meta")
        return cls(event_id=str(data["eventId"]), event_name=str(data["eventName"]),
                   payload=data.get("payload"),
                   correlation_id=str(data.get("correlationId") or data["eventId"]),
                   timestamp=int(data.get("timestamp") or 0),
                   meta=dict(meta) if isinstance(meta, Mapping) else {},
                   causation_id=data.get("causationId"),
                   idempotency_key=data.get("idempotencyKey"),
                   version=str(data.get("version", EVENT_MESSAGE_VERSION)))

    @classmethod
    def from_job_data(cls, data: Any, *, event_name: str, job_id: str,
                      timestamp: Optional[int] = None) -> "EventMessage":
        """The envelope in a job's data; data that is not an envelope becomes the payload
        (a job added to an event queue by hand still reaches the handler)."""
        if isinstance(data, Mapping) and "eventId" in data and "eventName" in data:
            return cls.from_dict(data)
        return cls(event_id=job_id, event_name=event_name, payload=data, correlation_id=job_id,
                   timestamp=timestamp or int(time.time() * 1000))
