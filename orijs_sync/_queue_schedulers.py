"""Job scheduler methods of Queue: upsert/get/list/remove job schedulers."""
from __future__ import annotations


class SchedulerQueueMixin:
    """Mixed into :class:`orijs_sync.queue.Queue`."""
