"""The OriJS event layer: per-event-type queues, request-response Futures, schedules.

``BullMQEventProvider`` speaks the @orijs/bullmq wire format on Redis;
``InProcessEventProvider`` has the same interface with no Redis.
"""
from .completion_tracker import CompletionTracker
from .context import EventContext, current_context, current_meta, propagation_context
from .in_process import InProcessEventProvider
from .message import EVENT_MESSAGE_VERSION, EventMessage
from .provider import BullMQEventProvider
from .queue_manager import QueueManager, QueueMetrics, RetryOptions
from .scheduled import ScheduledEventManager, ScheduleInfo
from .subscription import EventSubscription

__all__ = [
    "BullMQEventProvider", "InProcessEventProvider", "EventMessage", "EventSubscription",
    "QueueManager", "CompletionTracker", "ScheduledEventManager", "ScheduleInfo",
    "QueueMetrics", "RetryOptions", "EventContext", "current_context", "current_meta",
    "propagation_context", "EVENT_MESSAGE_VERSION",
]
