"""Propagation meta: what ``emit`` carries along when the caller gives no ``meta``.

A ``contextvars.ContextVar`` holds the current ``EventContext``.
Providers run every handler inside the context of the message it handles, so an
event emitted from a handler carries the same meta and names the handled event
as its ``causationId``. Callers outside a handler (a Flask request, a script)
can open one with ``propagation_context``.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

from ..base import validate as check
from .message import EventMessage

__all__ = ["EventContext", "current_context", "current_meta", "propagation_context",
           "handling", "resolve"]


@dataclass(frozen=True)
class EventContext:
    """The meta to propagate and, inside a handler, the event being handled."""

    meta: Dict[str, Any] = field(default_factory=dict)
    event_id: Optional[str] = None          # becomes the causationId of emits made here
    event_name: Optional[str] = None
    correlation_id: Optional[str] = None


_current: ContextVar[Optional[EventContext]] = ContextVar("orijs_sync_event_context",
                                                          default=None)


def current_context() -> Optional[EventContext]:
    return _current.get()


def current_meta() -> Dict[str, Any]:
    """A copy of the current propagation meta (``{}`` outside any context)."""
    ctx = _current.get()
    return dict(ctx.meta) if ctx is not None else {}


@contextlib.contextmanager
def propagation_context(meta: Mapping[str, Any], *,
                        causation_id: Optional[str] = None) -> Iterator[EventContext]:
    """Emits made inside the block carry ``meta`` (and ``causation_id`` if given)."""
    meta = check.mapping(meta, "meta", allow_none=False)
    token = _current.set(EventContext(meta=dict(meta), event_id=causation_id))
    try:
        yield _current.get()  # type: ignore[misc]
    finally:
        _current.reset(token)


@contextlib.contextmanager
def handling(message: EventMessage) -> Iterator[EventContext]:
    """The context a handler runs in: the message's meta, the message as the cause."""
    ctx = _handling_context(message)
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        leave_handling(token)


def enter_handling(message: EventMessage) -> "Token[Optional[EventContext]]":
    """What ``handling`` does on entry, for a caller that resets the returned token
    itself (a provider's handler wrapper: no generator on each event's path)."""
    return _current.set(_handling_context(message))


def _handling_context(message: EventMessage) -> EventContext:
    return EventContext(meta=dict(message.meta), event_id=message.event_id,
                        event_name=message.event_name, correlation_id=message.correlation_id)


def leave_handling(token: "Token[Optional[EventContext]]") -> None:
    _current.reset(token)


def resolve(meta: Optional[Mapping[str, Any]],
            causation_id: Optional[str]) -> Tuple[Dict[str, Any], Optional[str]]:
    """The meta and causation id an emit uses: explicit values win over the context."""
    ctx = _current.get()
    if meta is None:
        meta = ctx.meta if ctx is not None else {}
    if causation_id is None and ctx is not None:
        causation_id = ctx.event_id
    return check.mapping(meta, "meta"), causation_id
