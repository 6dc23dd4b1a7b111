"""Queue writes by job id and on the queue's side keys: a job's log and progress, the
events stream's length, a deduplication key (BullMQ's ``addJobLog``,
``updateJobProgress``, ``trimEvents``, ``removeDeduplicationKey`` and the
``streams.events.maxLen`` queue option)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ._job_state import append_log, write_progress
from .base import validate as check

# Where BullMQ keeps the events stream's length (every script that adds an event
# trims the stream to about that many entries; 10000 when unset).
MAX_LEN_EVENTS_FIELD = "opts.maxLenEvents"


def check_events_max_len(value: Any) -> Optional[int]:
    """The ``events_max_len`` queue option, checked (None: leave the stored value)."""
    return None if value is None else check.integer(value, "events_max_len", minimum=0)


class QueueWritesMixin:
    """Mixed into ``orijs_sync.queue.Queue`` (which provides keys, client, scripts)."""

    keys: Any
    client: Any
    scripts: Any
    name: str

    if TYPE_CHECKING:  # pragma: no cover - ConnectionOwner's
        def close(self) -> None: ...

    def _store_events_max_len(self, max_len: Optional[int]) -> None:
        """Store the queue's ``events_max_len`` (a new Queue's); on failure the Queue
        closes the connection it made."""
        if max_len is None:
            return
        try:
            self.client.hset(self.keys.meta, MAX_LEN_EVENTS_FIELD, max_len)
        except BaseException:
            self.close()
            raise

    def add_job_log(self, job_id: str, line: str, keep_logs: Optional[int] = None) -> int:
        """Append ``line`` to the log of job ``job_id``, keeping its last ``keep_logs``
        lines (None or 0: all); returns the log's length (BullMQ's ``addJobLog``).
        Raises ``JobNotFound`` when the job does not exist."""
        return append_log(self, check.job_id(job_id), line, keep_logs)

    def update_job_progress(self, job_id: str, progress: Any) -> None:
        """Set the progress (any JSON value) of job ``job_id``; QueueEvents of either
        side get a ``progress`` event (BullMQ's ``updateJobProgress``). Raises
        ``JobNotFound`` when the job does not exist."""
        write_progress(self, check.job_id(job_id), progress)

    def trim_events(self, max_len: int) -> int:
        """Trim the queue's events stream to about ``max_len`` entries, the oldest going
        first; returns how many were removed (BullMQ's ``trimEvents``). The trim is
        Redis's approximate one (``XTRIM MAXLEN ~``): whole stream nodes go, so up to a
        node's worth (100 entries by default) more than ``max_len`` may remain.
        Listeners (QueueEvents of either side) read on from where they were."""
        check.integer(max_len, "max_len", minimum=0)
        return int(self.client.xtrim(self.keys.events, maxlen=max_len, approximate=True))

    def remove_deduplication_key(self, deduplication_id: str) -> bool:
        """Delete the deduplication key of ``deduplication_id`` (BullMQ's
        ``removeDeduplicationKey``), whichever job holds it: the next add with that id
        is added. Returns whether there was one."""
        check.string(deduplication_id, "deduplication_id")
        return bool(self.client.delete(f"{self.keys.base}de:{deduplication_id}"))
