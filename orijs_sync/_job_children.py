"""A parent's children as a whole: remove those it still waits for, read the failures
it ignored (BullMQ's removeUnprocessedChildren and getFailedChildrenValues)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

from . import errors


class ChildrenJobMixin:
    """Mixed into ``orijs_sync.job.Job`` (which provides id, queue and the flow reads)."""

    id: str
    queue: Any

    if TYPE_CHECKING:  # FlowJobMixin's
        def get_ignored_children_failures(self) -> Dict[str, str]: ...

    def remove_unprocessed_children(self) -> int:
        """Remove the children this job still waits for, each with its own children, in
        whatever queue they are (BullMQ's removeUnprocessedChildren). A child being
        processed (locked) stays, and so does one that failed, with its children. Once
        it waits for no child, a job in waiting-children moves on to wait. Returns how
        many jobs were removed."""
        removed = self.queue.scripts.run("removeUnprocessedChildren",
                                         [self.queue.keys.job(self.id)], [])
        if removed == -1:
            raise errors.JobNotFound(f"job {self.id} of queue {self.queue.name} not found")
        return int(removed)

    def get_failed_children_values(self) -> Dict[str, str]:
        """Failed reasons of the children whose failure this job ignored, keyed
        ``"{prefix}:{queue}:{id}"`` (BullMQ's getFailedChildrenValues, which BullMQ
        deprecates for ``get_ignored_children_failures``: the same hash)."""
        return self.get_ignored_children_failures()
