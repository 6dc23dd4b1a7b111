"""Per-group FIFO queues compatible with Node GroupMQ 1.1: strict order inside a group,
parallel across groups, over GroupMQ's Redis layout (``groupmq:{name}:...``)."""
from ._options import GroupDataError, GroupOptionError
from .job import GroupJob
from .queue import GroupQueue
from .worker import GroupWorker

__all__ = ["GroupQueue", "GroupWorker", "GroupJob", "GroupOptionError", "GroupDataError"]
