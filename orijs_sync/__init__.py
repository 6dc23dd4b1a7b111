"""orijs_sync: BullMQ-compatible jobs, events and workflows on Redis, for code with no asyncio loop."""
from . import errors
from .flow_producer import FlowProducer, JobNode
from .job import Job
from .queue import Queue
from .queue_events import QueueEvent, QueueEvents
from .tasks import Task, Tasks
from .types import JobOptions
from .worker import Worker
from .worker_group import WorkerGroup

__all__ = ["FlowProducer", "Job", "JobNode", "JobOptions", "Queue", "QueueEvent", "QueueEvents",
           "Task", "Tasks", "Worker", "WorkerGroup", "errors"]
__version__ = "0.1.0"
