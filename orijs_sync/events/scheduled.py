"""ScheduledEventManager: recurring events (cron or every N seconds) as BullMQ job schedulers.

With a ``QueueManager`` (what ``BullMQEventProvider`` passes) the
scheduled jobs land on the event's own queue ``{queue_prefix}.{event_name}``,
wrapped in the EventMessage envelope, so ``subscribe`` handlers receive them
like any emitted event. Standalone (no QueueManager) it uses its own
``scheduled.{event_name}`` queues and the simpler data ``{payload, meta, scheduledAt}``.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Type, cast

from .. import errors
from ..base import fork
from ..base import validate as check
from ..base.util import Seconds, to_seconds
from ..job_scheduler import validate_pattern
from ..queue import Queue
from ..types import JobOptions, JobTemplate
from .message import EVENT_JOB_NAME, EventMessage, validate_event_name
from .queue_manager import QueueManager

log = logging.getLogger(__name__)

__all__ = ["ScheduledEventManager", "ScheduleInfo", "validate_schedule"]


@dataclass(frozen=True)
class ScheduleInfo:
    event_name: str
    schedule_id: str
    queue_name: str
    cron: Optional[str] = None
    every: Optional[float] = None    # seconds
    payload: Any = None
    meta: Dict[str, Any] = field(default_factory=dict)
    next_run: Optional[int] = None   # ms since the epoch of the next run, when known


def validate_schedule(schedule_id: Any, cron: Optional[str],
                      every: Optional[Seconds]) -> Optional[float]:
    """The seed's rules: cron has 5 or 6 fields; every is a positive interval (seconds,
    at least 1 ms); exactly one of them. Returns ``every`` in seconds."""
    check.string(schedule_id, "schedule_id")
    if cron is not None and every is not None:
        raise errors.InvalidArgument("give either cron or every, not both")
    if cron is None and every is None:
        raise errors.InvalidArgument("a schedule needs cron='...' or every=seconds")
    if cron is not None:
        check.string(cron, "cron")
        try:   # the job schedulers' parser: one dialect, BullMQ's (6 fields: seconds first)
            validate_pattern(cron)
        except errors.InvalidArgument as exc:
            check.bad_value("cron", cron, f"is not a valid cron expression ({exc})")
        return None
    seconds = to_seconds(every, "every", allow_none=False)
    if not seconds or round(seconds * 1000) < 1:
        check.bad_value("every", every, "must be a positive interval of at least 1 ms")
    return seconds


class ScheduledEventManager:
    """Adds and removes job schedulers; tracks the ones it added."""

    def __init__(self, connection: Any = None, *, queue_manager: Optional[QueueManager] = None,
                 prefix: str = "bull", queue_class: Type[Queue] = Queue,
                 logger: Optional[logging.Logger] = None) -> None:
        if queue_manager is not None and not isinstance(queue_manager, QueueManager):
            check.bad_type("queue_manager", queue_manager, "a QueueManager")
        check.string(prefix, "prefix")
        check.function(queue_class, "queue_class")
        self.connection = connection if queue_manager is None or connection is not None \
            else queue_manager.connection
        self.queue_manager = queue_manager
        self.prefix = queue_manager.prefix if queue_manager is not None else prefix
        self._queue_class = queue_class
        self._log = logger or log
        self._lock = threading.Lock()   # guards _schedules, _own_queues, _stopped
        self._schedules: Dict[str, Dict[str, ScheduleInfo]] = {}
        self._own_queues: Dict[str, Queue] = {}
        self._stopped = False
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()   # schedules live in Redis; nothing else to reset

    def get_queue_name(self, event_name: str) -> str:
        if self.queue_manager is not None:
            return self.queue_manager.get_queue_name(event_name)
        return f"scheduled.{event_name}"

    def _queue(self, event_name: str) -> Queue:
        if self.queue_manager is not None:
            return self.queue_manager.get_queue(event_name)
        with self._lock:
            if self._stopped:
                raise errors.ShutdownError("ScheduledEventManager is stopped")
            queue = self._own_queues.get(event_name)
            if queue is None:
                queue = self._queue_class(self.get_queue_name(event_name),
                                          connection=self.connection, prefix=self.prefix)
                self._own_queues[event_name] = queue
            return queue

    def _template(self, event_name: str, payload: Any,
                  meta: Optional[Mapping[str, Any]]) -> JobTemplate:
        message = EventMessage.create(event_name, payload, meta)   # validates payload/meta
        if self.queue_manager is not None:
            return {"name": EVENT_JOB_NAME, "data": message.to_dict(),
                    "opts": cast(JobOptions, self.queue_manager.job_options())}
        return {"name": event_name,
                "data": {"payload": message.payload, "meta": message.meta,
                         "scheduledAt": int(time.time() * 1000)},
                "opts": {}}

    def schedule(self, event_name: str, schedule_id: str, *, cron: Optional[str] = None,
                 every: Optional[Seconds] = None, payload: Any = None,
                 meta: Optional[Mapping[str, Any]] = None) -> ScheduleInfo:
        """Create or replace the schedule ``schedule_id`` of ``event_name``."""
        validate_event_name(event_name)
        seconds = validate_schedule(schedule_id, cron, every)
        template = self._template(event_name, payload, meta)
        with self._lock:
            if self._stopped:
                raise errors.ShutdownError("ScheduledEventManager is stopped")
        queue = self._queue(event_name)
        if cron is not None:
            queue.upsert_job_scheduler(schedule_id, pattern=cron, template=template)
        else:
            queue.upsert_job_scheduler(schedule_id, every=seconds, template=template)
        stored = queue.get_job_scheduler(schedule_id)
        info = ScheduleInfo(event_name, schedule_id, queue.name, cron=cron, every=seconds,
                            payload=payload, meta=dict(template["data"]["meta"]),
                            next_run=stored.next if stored is not None else None)
        with self._lock:
            self._schedules.setdefault(event_name, {})[schedule_id] = info
        return info

    def unschedule(self, event_name: str, schedule_id: str) -> bool:
        """Remove the schedule (also one another process added); False if there was none."""
        queue = self._queue(event_name)
        removed = bool(queue.remove_job_scheduler(schedule_id))
        with self._lock:
            by_id = self._schedules.get(event_name, {})
            by_id.pop(schedule_id, None)
            if not by_id:
                self._schedules.pop(event_name, None)
        return removed

    @property
    def schedules(self) -> List[ScheduleInfo]:
        with self._lock:
            return [info for by_id in self._schedules.values() for info in by_id.values()]

    def stop(self) -> None:
        """Close the queues this manager opened and forget the schedules (they stay in
        Redis: schedules outlive the process that created them). Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            queues = list(self._own_queues.values())
            self._own_queues.clear()
            self._schedules.clear()
        for queue in queues:
            try:
                queue.close()
            except Exception:  # noqa: BLE001
                self._log.exception("closing queue %r failed", queue)
