"""FlowHandle (what ``execute`` returns) and FlowTracker (a provider's local bookkeeping).

The tracker holds two maps, both guarded by one lock and both bounded:

- pending results, ``(workflow, flow id) -> [Pending]`` (several when executes share
  an idempotency key): registered *before* the flow is added, removed when settled.
  ``claim``/``claim_all`` are the settle-once guard: whoever claims an entry (the
  events thread, the timeout, a local step failure) is the only one to settle it.
- local flow states, ``(workflow, flow id) -> LocalFlowState``, in insertion order
  (LRU proxy): the oldest is evicted at ``max_flow_states`` (0: no limit); a settled
  flow's state is removed ``cleanup_delay`` seconds later (0: never), as in OriJS.

Timeouts and cleanups are entries of the provider's single ``Timer``.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from .. import errors
from ..base import fork
from ..base.timer import Timer, TimerHandle
from ..waits.futures import CheckedFuture, result_or_named_timeout, settle

if TYPE_CHECKING:  # pragma: no cover
    from ..base.lanes import Lanes

__all__ = ["FlowHandle", "FlowTracker", "LocalFlowState", "Pending", "FLOW_STATUSES"]

FLOW_STATUSES = ("pending", "running", "completed", "failed")
FlowKey = Tuple[str, str]


class FlowHandle(CheckedFuture):
    """A ``concurrent.futures.Future`` of a workflow's result, with ``id`` (the flow
    id) and ``status()``. A running workflow cannot be cancelled: ``cancel()`` is False.
    Done-callbacks never run on the library's threads (see ``CheckedFuture``)."""

    def __init__(self, flow_id: str, workflow_name: str,
                 status_fn: Callable[[str, str], str],
                 callbacks: "Optional[Lanes]" = None) -> None:
        super().__init__(callbacks)
        self._flow_id = flow_id
        self.workflow_name = workflow_name
        self._status_fn = status_fn

    @property
    def id(self) -> str:
        return self._flow_id

    def status(self) -> str:
        """pending, running, completed or failed (local state, else Redis; failed after a
        timeout until the outcome arrives)."""
        return self._status_fn(self._flow_id, self.workflow_name)

    def cancel(self) -> bool:
        return False

    def result(self, timeout: Optional[float] = None) -> Any:
        """The workflow's result; a wait cut short by ``timeout`` raises an
        ``errors.TimeoutError`` naming the workflow, its flow id and the seconds waited."""
        return result_or_named_timeout(self, timeout, f"workflow {self.workflow_name!r}",
                                       self._flow_id)

    def _settle(self, result: Any = None, exc: Optional[BaseException] = None) -> None:
        settle(self, result, exc)

    def __repr__(self) -> str:
        return f"<FlowHandle {self.workflow_name}:{self._flow_id} {self._state.lower()}>"


class Pending:
    __slots__ = ("key", "handle", "timer", "timeout", "settled")

    def __init__(self, key: FlowKey, handle: FlowHandle, timeout: float) -> None:
        self.key = key
        self.handle = handle
        self.timeout = timeout
        self.timer: Optional[TimerHandle] = None
        self.settled = False


@dataclass
class LocalFlowState:
    workflow_name: str
    flow_id: str
    status: str = "pending"
    cleanup: Optional[TimerHandle] = None
    outcome: Optional[Tuple[bool, Any]] = None   # (ok, result or exception), when settled


class FlowTracker:
    def __init__(self, timer: Timer, *, max_flow_states: int, cleanup_delay: float) -> None:
        if isinstance(max_flow_states, bool) or not isinstance(max_flow_states, int) \
                or max_flow_states < 0:
            raise errors.InvalidArgument(
                f"max_flow_states must be an integer >= 0 (0: no limit), got {max_flow_states!r}")
        self.timer = timer
        self.max_flow_states = max_flow_states
        self.cleanup_delay = cleanup_delay
        self._lock = threading.Lock()
        self._pending: Dict[FlowKey, List[Pending]] = {}
        self._states: "OrderedDict[FlowKey, LocalFlowState]" = OrderedDict()
        self._closed = False
        self.on_settled: Optional[Callable[[Pending], Any]] = None   # each claimed one
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The parent's pending results and flow states are the parent's: dropped here,
        never settled (``status()`` of those flows asks Redis)."""
        self._lock = threading.Lock()
        self._pending = {}
        self._states = OrderedDict()

    # -- pending results ---------------------------------------------------
    def add_pending(self, key: FlowKey, handle: FlowHandle, timeout: float,
                    on_timeout: Callable[[Pending], Any]) -> Pending:
        """Register a pending result; ``on_timeout(pending)`` runs on the timer thread
        after ``timeout`` seconds (0: never)."""
        pending = Pending(key, handle, timeout)
        with self._lock:
            if self._closed:
                raise errors.ShutdownError("the workflow provider is stopped")
            self._pending.setdefault(key, []).append(pending)
            if timeout > 0:
                pending.timer = self.timer.call_later(timeout, lambda: on_timeout(pending))
        return pending

    def has_pending(self, key: FlowKey) -> bool:
        with self._lock:
            return key in self._pending

    def while_pending(self, pending: Pending, fn: Callable[[], Any]) -> None:
        """``fn()``, under the lock, unless the result is settled: what it registers is
        undone by ``on_settled``, which a claim calls after it."""
        with self._lock:
            if not pending.settled:
                fn()

    def claim(self, pending: Pending) -> bool:
        """Take the right to settle one pending result (False: someone else has it)."""
        with self._lock:
            if pending.settled:
                return False
            pending.settled = True
            entries = self._pending.get(pending.key)
            if entries is not None and pending in entries:
                entries.remove(pending)
                if not entries:
                    del self._pending[pending.key]
        self._claimed([pending])
        return True

    def _claimed(self, claimed: List[Pending]) -> None:
        for p in claimed:
            self.timer.cancel(p.timer)
            if self.on_settled is not None:
                self.on_settled(p)

    def claim_all(self, key: FlowKey) -> List[Pending]:
        """Take every unsettled pending result of a flow."""
        with self._lock:
            entries = self._pending.pop(key, [])
            claimed = [p for p in entries if not p.settled]
            for p in claimed:
                p.settled = True
        self._claimed(claimed)
        return claimed

    # -- local flow states -------------------------------------------------
    def track(self, key: FlowKey, status: str = "pending") -> Tuple[LocalFlowState, bool]:
        """The flow's state and whether it is new: created (evicting the oldest at the
        bound) or refreshed (moved to the young end)."""
        evicted: List[LocalFlowState] = []
        with self._lock:
            state = self._states.get(key)
            if state is not None:
                self._states.move_to_end(key)
                return state, False
            while self.max_flow_states and len(self._states) >= self.max_flow_states:
                _, old = self._states.popitem(last=False)
                evicted.append(old)
            state = LocalFlowState(key[0], key[1], status)
            self._states[key] = state
        for old in evicted:
            self.timer.cancel(old.cleanup)
        return state, True

    def get_state(self, key: FlowKey) -> Optional[LocalFlowState]:
        with self._lock:
            return self._states.get(key)

    def set_status(self, key: FlowKey, status: str,
                   outcome: Optional[Tuple[bool, Any]] = None,
                   only_from: Optional[str] = None) -> None:
        """Update a tracked flow (an evicted one is not brought back; with ``only_from``,
        only a flow in that status); a final status schedules the state's removal after
        ``cleanup_delay``."""
        with self._lock:
            state = self._states.get(key)
            if state is None or (only_from is not None and state.status != only_from):
                return
            state.status = status
            if outcome is not None:
                state.outcome = outcome
            final = status in ("completed", "failed")
            if final and state.cleanup is None and not self._closed and self.cleanup_delay > 0:
                try:
                    state.cleanup = self.timer.call_later(self.cleanup_delay,
                                                          lambda: self._expire(key, state))
                except errors.ShutdownError:    # stopping: close() clears the states
                    pass

    def forget(self, key: FlowKey) -> None:
        with self._lock:
            state = self._states.pop(key, None)
        if state is not None:
            self.timer.cancel(state.cleanup)

    def _expire(self, key: FlowKey, state: LocalFlowState) -> None:
        with self._lock:
            if self._states.get(key) is state:
                del self._states[key]

    # -- lifecycle and introspection ---------------------------------------
    def close(self) -> List[Pending]:
        """Refuse new entries; return the unsettled pending results (claimed) and clear
        both maps. The caller fails the returned handles."""
        with self._lock:
            self._closed = True
            claimed = [p for entries in self._pending.values() for p in entries
                       if not p.settled]
            for p in claimed:
                p.settled = True
            self._pending.clear()
            states = list(self._states.values())
            self._states.clear()
        self._claimed(claimed)
        for state in states:
            self.timer.cancel(state.cleanup)
        return claimed

    def sizes(self) -> Dict[str, int]:
        with self._lock:
            pending = sum(len(v) for v in self._pending.values())
            states = len(self._states)
        return {"pending": pending, "flow_states": states, "timers": len(self.timer),
                "timer_heap": self.timer.heap_size}
