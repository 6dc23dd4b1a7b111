"""A job's state checks, logs and progress: the Job methods, and the writes Queue
also makes by job id (BullMQ's ``Queue.addJobLog`` and ``updateJobProgress``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from . import errors
from .base import validate as check
from .base.util import dumps


def append_log(queue: Any, job_id: str, line: str, keep_logs: Optional[int]) -> int:
    """Append ``line`` to the job's log, keeping its last ``keep_logs`` lines (None or
    0: all); returns the log's length. Raises ``JobNotFound`` for a missing job."""
    check.string(line, "line", non_empty=False)
    keep = 0 if keep_logs is None else check.integer(keep_logs, "keep_logs", minimum=0)
    count = queue.scripts.run("addLog", [queue.keys.job(job_id), queue.keys.logs(job_id)],
                              [line, keep])
    if count == -1:
        raise errors.JobNotFound(f"job {job_id} of queue {queue.name} not found")
    return int(count)


def write_progress(queue: Any, job_id: str, progress: Any) -> None:
    """Store the job's progress (any JSON value) and emit ``progress`` on the events
    stream. Raises ``JobNotFound`` for a missing job."""
    text = dumps(progress, "progress")
    k = queue.keys
    code = queue.scripts.run("updateProgress", [k.job(job_id), k.events, k.meta],
                             [job_id, text])
    if code == -1:
        raise errors.JobNotFound(f"job {job_id} of queue {queue.name} not found")


class JobStateMixin:
    """Mixed into ``orijs_sync.job.Job`` (which provides ``id``, ``queue``, ``get_state``)."""

    id: str
    queue: Any

    if TYPE_CHECKING:  # pragma: no cover - Job's
        def get_state(self) -> str: ...

    def is_delayed(self) -> bool:
        """Whether the job is delayed (BullMQ's ``isDelayed``)."""
        return self.get_state() == "delayed"

    def is_active(self) -> bool:
        """Whether a worker is processing the job."""
        return self.get_state() == "active"

    def is_waiting(self) -> bool:
        """Whether the job is in the wait (or, queue paused, the paused) list; a
        prioritized job is not (BullMQ's ``isWaiting``)."""
        return self.get_state() == "waiting"

    def is_waiting_children(self) -> bool:
        """Whether the job is a parent waiting for its children."""
        return self.get_state() == "waiting-children"

    def clear_logs(self, keep_logs: Optional[int] = None) -> None:
        """Delete the job's log lines, or keep its last ``keep_logs`` (None or 0: delete
        all), as BullMQ's ``clearLogs``."""
        keep = 0 if keep_logs is None else check.integer(keep_logs, "keep_logs", minimum=0)
        key = self.queue.keys.logs(self.id)
        if keep:
            self.queue.client.ltrim(key, -keep, -1)
        else:
            self.queue.client.delete(key)
