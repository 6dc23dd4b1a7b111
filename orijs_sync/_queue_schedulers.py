"""Job scheduler methods of Queue: upsert/get/list/remove job schedulers."""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from . import job_scheduler
from .base.util import Seconds
from .job_scheduler import DateLike, JobSchedulerInfo
from .types import JobTemplate

if TYPE_CHECKING:  # pragma: no cover
    from .job import Job


class SchedulerQueueMixin:
    """Mixed into ``orijs_sync.queue.Queue``."""

    def upsert_job_scheduler(self, scheduler_id: str, *, every: Optional[Seconds] = None,
                             pattern: Optional[str] = None, tz: Optional[str] = None,
                             start_date: Optional[DateLike] = None,
                             end_date: Optional[DateLike] = None, limit: Optional[int] = None,
                             template: Optional[JobTemplate] = None) -> Optional["Job"]:
        """Create or replace the scheduler ``scheduler_id``; returns the job of its next run.

        Exactly one of ``every`` (seconds or ``timedelta``) and ``pattern`` (cron, 5
        fields or 6 with seconds first, read in ``tz`` or else local time). ``start_date``
        and ``end_date`` are datetimes (or ms since the epoch); ``limit`` caps the
        number of runs; ``template`` is ``{"name", "data", "opts"}`` with ``opts`` as
        ``Queue.add`` keywords (``orijs_sync.types.JobTemplate``). Bad input raises
        ``ValueError`` and writes nothing.
        Upserting the same id again (from any process) replaces the pending run
        instead of starting a second series.
        """
        return job_scheduler.upsert(self, scheduler_id, every=every, pattern=pattern,  # type: ignore[arg-type]
                                    tz=tz, start_date=start_date, end_date=end_date,
                                    limit=limit, template=template)

    def get_job_scheduler(self, scheduler_id: str) -> Optional[JobSchedulerInfo]:
        """The scheduler's settings and next run, or ``None``."""
        return job_scheduler.get(self, scheduler_id)  # type: ignore[arg-type]

    def get_job_schedulers(self, start: int = 0, end: int = -1,
                           asc: bool = False) -> List[JobSchedulerInfo]:
        """Schedulers ordered by next run (latest first unless ``asc``), ranks start..end."""
        return job_scheduler.list_all(self, start, end, asc)  # type: ignore[arg-type]

    def get_job_schedulers_count(self) -> int:
        """How many job schedulers the queue holds (BullMQ's ``getJobSchedulersCount``)."""
        return int(self.client.zcard(self.keys.repeat))  # type: ignore[attr-defined]

    def remove_job_scheduler(self, scheduler_id: str) -> bool:
        """Remove the scheduler and its run not yet taken; False when there was none."""
        return job_scheduler.remove(self, scheduler_id)  # type: ignore[arg-type]
