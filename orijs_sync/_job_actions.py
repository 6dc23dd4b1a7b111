"""Job actions: retry, promote, change delay or priority, move to delayed, remove."""
from __future__ import annotations

from typing import Any, Optional

from . import errors
from ._job_manual import raise_for_code
from .base import validate as check
from .base.util import Seconds, dumps, now_ms, to_ms
from .options import MAX_PRIORITY

_CODES = {-1: "does not exist", -3: "is not in the expected state"}


class JobActionsMixin:
    """Mixed into ``orijs_sync.job.Job``."""

    id: str
    queue: Any
    token: Optional[str]
    priority: int
    _moved: bool
    _added_event: Optional[str]

    def _raise_for(self, code: Any, action: str) -> None:
        if isinstance(code, int) and code < 0:
            reason = _CODES.get(code, f"error {code}")
            exc = errors.JobNotFound if code == -1 else errors.InvalidStateError
            raise exc(f"cannot {action} job {self.id}: it {reason}")

    def retry(self, state: str = "failed", reset_attempts_made: bool = False,
              reset_attempts_started: bool = False) -> None:
        """Move a failed (or completed) job back to wait."""
        check.one_of(state, ("failed", "completed"), "state")
        check.boolean(reset_attempts_made, "reset_attempts_made")
        check.boolean(reset_attempts_started, "reset_attempts_started")
        code = self.queue.scripts.run(
            "reprocessJob", [self.queue.keys.job(self.id)],
            [self.queue.keys.base, self.id, state, "1" if reset_attempts_made else "0",
             "1" if reset_attempts_started else "0"])
        self._raise_for(code, "retry")
        self._added_event = None     # a new run: a wait reads which run is current

    def promote(self) -> None:
        """Run a delayed job now."""
        code = self.queue.scripts.run("promote", [self.queue.keys.job(self.id)],
                                      [self.queue.keys.base, self.id])
        self._raise_for(code, "promote")

    def change_delay(self, delay: Seconds) -> None:
        """Give a delayed job a new delay (seconds from now)."""
        ms = to_ms(delay, "delay", allow_none=False)
        k = self.queue.keys
        code = self.queue.scripts.run(
            "changeDelay", [k.job(self.id), k.delayed, k.events, k.meta, k.marker],
            [self.id, ms, now_ms()])
        self._raise_for(code, "change the delay of")

    def change_priority(self, priority: int = 0, *, lifo: bool = False) -> None:
        """Give the job a new priority (0: none); a waiting or prioritized job is queued
        again under it, behind the jobs of that priority, or with ``lifo`` ahead of
        them (BullMQ's ``changePriority``)."""
        check.integer(priority, "priority", minimum=0, maximum=MAX_PRIORITY)
        check.boolean(lifo, "lifo")
        code = self.queue.scripts.run("changePriority", [self.queue.keys.job(self.id)],
                                      [self.queue.keys.base, self.id, priority,
                                       "1" if lifo else ""])
        self._raise_for(code, "change the priority of")
        self.priority = priority

    def move_to_delayed(self, timestamp: float, token: Optional[str] = None) -> None:
        """Park the active job until ``timestamp`` (seconds since the epoch, as
        ``time.time()``) without counting an attempt (BullMQ's ``job.moveToDelayed``).
        From inside its handler (``token`` defaults to the job's), then raise
        ``errors.DelayedError`` or return: the worker leaves the job delayed. A manually
        taken job gives the ``token`` it was taken with."""
        check.number(timestamp, "timestamp", minimum=0, maximum=check.MAX_INT / 1000)
        token = self.token if token is None else check.string(token, "token")
        if token is None:
            raise errors.InvalidStateError("move_to_delayed() is for a job inside its handler, "
                                           "or one taken with a token (give it)")
        k = self.queue.keys
        code = self.queue.scripts.run(
            "moveToDelayed", [k.job(self.id), k.active, k.events, k.stalled, k.meta],
            [k.base, self.id, now_ms(), token, int(timestamp * 1000), "1", dumps([])])
        raise_for_code(self.id, code, "move to delayed")
        self._moved = True

    def remove(self, remove_children: bool = True) -> bool:
        """Remove the job (see ``Queue.remove``: with ``remove_children``, its children
        down the tree too). Returns whether it was removed."""
        check.boolean(remove_children, "remove_children")
        return bool(self.queue.remove(self.id, remove_children=remove_children))
