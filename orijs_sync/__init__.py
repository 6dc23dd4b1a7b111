"""orijs_sync: BullMQ-compatible jobs, events and workflows on Redis, for code with no asyncio loop."""
from . import errors
from .job import Job
from .queue import Queue
from .queue_events import QueueEvent, QueueEvents
from .worker import Worker

__all__ = ["Job", "Queue", "QueueEvent", "QueueEvents", "Worker", "errors"]
__version__ = "0.1.0"
