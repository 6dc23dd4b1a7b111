"""Key names of BullMQ v5's layout: ``{prefix}:{queue}:{suffix}``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .base import validate

SUFFIXES = (
    "wait", "active", "paused", "prioritized", "pc", "delayed", "marker",
    "completed", "failed", "waiting-children", "stalled", "stalled-check",
    "id", "meta", "events", "limiter", "de", "repeat", "metrics",
)


@dataclass(frozen=True)
class QueueKeys:
    """All key names of one queue. ``base`` is ``"{prefix}:{queue}:"``."""

    prefix: str
    name: str

    def __post_init__(self) -> None:
        validate.name(self.name, "name")
        validate.string(self.prefix, "prefix")
        base = f"{self.prefix}:{self.name}:"
        for suffix in SUFFIXES:   # plain attributes: read on every job
            object.__setattr__(self, suffix.replace("-", "_"), base + suffix)

    @property
    def base(self) -> str:
        return f"{self.prefix}:{self.name}:"

    @property
    def queue_key(self) -> str:
        """``"{prefix}:{queue}"``, the form BullMQ stores in a job's ``parent.queueKey``."""
        return f"{self.prefix}:{self.name}"

    if TYPE_CHECKING:  # set in __post_init__, one per suffix
        def __getattr__(self, item: str) -> str: ...

    def key(self, suffix: str) -> str:
        return self.base + suffix

    def job(self, job_id: str) -> str:
        return self.base + str(job_id)

    def lock(self, job_id: str) -> str:
        return f"{self.base}{job_id}:lock"

    def logs(self, job_id: str) -> str:
        return f"{self.base}{job_id}:logs"

    def dependencies(self, job_id: str) -> str:
        return f"{self.base}{job_id}:dependencies"

    def processed(self, job_id: str) -> str:
        return f"{self.base}{job_id}:processed"
