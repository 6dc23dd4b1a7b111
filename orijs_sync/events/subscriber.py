"""What an event type's worker runs for each job: the ``EventMessage`` rebuilt from
the job alone, the subscriber called inside that message's propagation context.

``Subscriber`` is the same as a module-level object holding the subscriber by
reference, so that with ``default_worker_options={"processes": N}`` it is sent to the
worker's child processes (``engine.children``) and runs there, where no provider
exists: nothing it does needs one.
"""
from __future__ import annotations

from typing import Any, Callable

from ..job import Job
from . import context
from .message import EventMessage

EventHandler = Callable[[EventMessage], Any]


def handle(handler: EventHandler, event_name: str, job: Job) -> Any:
    """``handler(message)`` for the event in ``job``, in the message's context (emits
    made there carry its meta and name it as their cause)."""
    message = EventMessage.from_job_data(job.data, event_name=event_name, job_id=job.id,
                                         timestamp=job.timestamp)
    token = context.enter_handling(message)
    try:
        return handler(message)
    finally:
        context.leave_handling(token)


class Subscriber:
    """``handle`` for one event type and one subscriber, as a picklable callable (the
    subscriber pickles by reference: a function defined at a module's top level)."""

    def __init__(self, event_name: str, handler: EventHandler) -> None:
        self.event_name = event_name
        self.handler = handler

    def __call__(self, job: Job) -> Any:
        return handle(self.handler, self.event_name, job)

    def __repr__(self) -> str:
        return f"<event handler {self.event_name}: {self.handler!r}>"
