"""Flow (parent/child) methods of Job: children values, dependencies, waiting for children."""
from __future__ import annotations


class FlowJobMixin:
    """Mixed into :class:`orijs_sync.job.Job`."""
