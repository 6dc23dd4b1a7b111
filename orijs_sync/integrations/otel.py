"""OpenTelemetry spans (``pip install orijs_sync[otel]``), carried in jobs as BullMQ's
``telemetry`` option carries them, so a Node BullMQ service with telemetry on
(``bullmq-otel``) continues a Python trace and a Python worker continues a Node one.

    telemetry = Telemetry()                      # the global tracer provider, or tracer_provider=...
    job = telemetry.add(queue, "send", {...})     # span "add {queue}.{name}" (PRODUCER)
    telemetry.instrument_worker(worker)           # span "process {queue}" (CONSUMER) per job
    telemetry.emit(provider, "order.created", payload)        # span "emit {event}"
    telemetry.execute(provider, workflow, data)               # span "execute {workflow}"
    QueueManager(url, queue_class=telemetry.queue_class(),    # the event layer's jobs too
                 worker_class=telemetry.worker_class())
    BullMQWorkflowProvider(url, flow_producer_class=telemetry.flow_producer_class(),
                           worker_class=telemetry.worker_class())   # a workflow's step jobs too

The trace context goes into the job's options as ``tm``: the propagator's carrier
(``traceparent``...) in JSON, as BullMQ stores it; a job added with
``omit_context`` (``omc``) starts a new trace in its worker.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Type

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..flow_producer import FlowProducer, JobNode
from ..job import Job
from ..queue import Queue
from ..types import FlowJob
from ..worker import Worker

log = logging.getLogger("orijs_sync.otel")   # the logger name users know (the module moved)

__all__ = ["Telemetry"]

# BullMQ's span attribute names (its TelemetryAttributes)
QUEUE_NAME = "bullmq.queue.name"
QUEUE_OPERATION = "bullmq.queue.operation"
JOB_NAME = "bullmq.job.name"
JOB_ID = "bullmq.job.id"
WORKER_ID = "bullmq.worker.id"
WORKER_NAME = "bullmq.worker.name"


def _carrier_context(job: Job) -> Optional[Any]:
    """The trace context a job carries (``opts.tm``), or None."""
    if job.opts.get("omc"):
        return None
    metadata = job.opts.get("tm")
    if not isinstance(metadata, str):
        return None
    try:
        carrier = json.loads(metadata)
    except ValueError:
        log.warning("job %s carries telemetry metadata that is not JSON; a new trace starts",
                    job.id)
        return None
    return propagate.extract(carrier) if isinstance(carrier, dict) else None


class Telemetry:
    """Spans for adds, processing, emits and executes, from one tracer."""

    def __init__(self, tracer_provider: Optional[trace.TracerProvider] = None,
                 name: str = "orijs_sync") -> None:
        self.tracer = trace.get_tracer(name, tracer_provider=tracer_provider)

    def add(self, queue: Queue, name: str, data: Any = None, **opts: Any) -> Job:
        """``queue.add(...)`` inside a PRODUCER span whose context the job carries."""
        if isinstance(queue, _TracedQueue):
            return queue.add(name, data, **opts)
        return self._add(queue, Queue.add, name, data, opts)

    def _add(self, queue: Queue, add: Callable[..., Job], name: str, data: Any,
             opts: Dict[str, Any]) -> Job:
        attributes = {QUEUE_NAME: queue.name, QUEUE_OPERATION: "add", JOB_NAME: name}
        with self.tracer.start_as_current_span(f"add {queue.name}.{name}", kind=SpanKind.PRODUCER,
                                               attributes=attributes) as span:
            carrier: Dict[str, str] = {}
            propagate.inject(carrier)
            if not (opts.get("telemetry") or {}).get("omit_context"):
                opts["telemetry"] = dict(opts.get("telemetry") or {}, metadata=json.dumps(carrier))
            job = add(queue, name, data, **opts)
            span.set_attribute(JOB_ID, job.id)
            return job

    def queue_class(self) -> Type[Queue]:
        """A ``Queue`` subclass whose ``add`` is traced, for the components that
        take a ``queue_class`` (``QueueManager`` of the event layer, ``FlowProducer``...)."""
        return type("TracedQueue", (_TracedQueue,), {"telemetry": self})

    def flow_producer_class(self) -> Type[FlowProducer]:
        """A ``FlowProducer`` subclass whose trees are added inside a PRODUCER span
        (``add flow {queue}.{name}``) whose context every job of the tree carries, for
        the components that take a ``flow_producer_class`` (the workflow provider)."""
        return type("TracedFlowProducer", (_TracedFlowProducer,), {"telemetry": self})

    def worker_class(self) -> Type[Worker]:
        """A ``Worker`` subclass whose jobs run inside process spans, for the
        components that take a ``worker_class``."""
        return type("TracedWorker", (_TracedWorker,), {"telemetry": self})

    def instrument_worker(self, worker: Worker) -> Worker:
        """Each job of ``worker`` runs inside a CONSUMER span, child of the context the job
        carries (BullMQ's ``process {queue}``). Call before ``start()``."""
        worker.processor = self._traced(worker, worker.processor)
        return worker

    def _traced(self, worker: Worker, processor: Callable[[Job], Any]) -> Callable[[Job], Any]:
        def process(job: Job) -> Any:
            attributes = {QUEUE_NAME: worker.name, QUEUE_OPERATION: "process", JOB_ID: job.id,
                          JOB_NAME: job.name, WORKER_ID: worker.id}
            if worker.worker_name:
                attributes[WORKER_NAME] = worker.worker_name
            with self.tracer.start_as_current_span(
                    f"process {worker.name}", context=_carrier_context(job),
                    kind=SpanKind.CONSUMER, attributes=attributes,
                    record_exception=False, set_status_on_exception=False) as span:
                try:
                    return processor(job)
                except Exception as exc:
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, str(exc)))
                    raise
        return process

    def emit(self, provider: Any, event: str, payload: Any = None, *args: Any,
             **kwargs: Any) -> Any:
        """``provider.emit(...)`` inside a PRODUCER span ``emit {event}``."""
        with self.tracer.start_as_current_span(f"emit {event}", kind=SpanKind.PRODUCER,
                                               attributes={"orijs.event.name": event}):
            return provider.emit(event, payload, *args, **kwargs)

    def execute(self, provider: Any, workflow: Any, data: Any = None, *args: Any,
                **kwargs: Any) -> Any:
        """``provider.execute(...)`` inside a PRODUCER span ``execute {workflow}``."""
        name = getattr(workflow, "name", str(workflow))
        with self.tracer.start_as_current_span(f"execute {name}", kind=SpanKind.PRODUCER,
                                               attributes={"orijs.workflow.name": name}):
            return provider.execute(workflow, data, *args, **kwargs)


class _TracedQueue(Queue):
    telemetry: Telemetry

    def add(self, name: str, data: Any = None, **opts: Any) -> Job:
        return self.telemetry._add(self, Queue.add, name, data, opts)


class _TracedWorker(Worker):
    telemetry: Telemetry

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.telemetry.instrument_worker(self)


def _with_context(node: Mapping[str, Any], metadata: str) -> Dict[str, Any]:
    """A copy of a flow node whose jobs (children too) carry ``metadata``, unless a job
    asks to omit the context."""
    opts = dict(node.get("opts") or {})
    telemetry = dict(opts.get("telemetry") or {})
    if not telemetry.get("omit_context"):
        opts["telemetry"] = dict(telemetry, metadata=metadata)
    copy = dict(node, opts=opts)
    if node.get("children"):
        copy["children"] = [_with_context(child, metadata) for child in node["children"]]
    return copy


class _TracedFlowProducer(FlowProducer):
    telemetry: Telemetry

    def add_bulk(self, flows: Iterable[FlowJob]) -> List[JobNode]:
        """The trees are still added in one transaction, inside one PRODUCER span
        whose context every job of every tree carries."""
        trees: Any = list(flows) if isinstance(flows, Iterable) and \
            not isinstance(flows, (str, bytes, Mapping)) else flows
        first = trees[0] if isinstance(trees, list) and trees else None
        name = f"{first.get('queue_name')}.{first.get('name')}" \
            if isinstance(first, Mapping) else "?"
        with self.telemetry.tracer.start_as_current_span(
                f"add flow {name}", kind=SpanKind.PRODUCER,
                attributes={QUEUE_OPERATION: "addFlow"}):
            carrier: Dict[str, str] = {}
            propagate.inject(carrier)
            metadata = json.dumps(carrier)
            if isinstance(trees, list):
                trees = [_with_context(t, metadata) if isinstance(t, Mapping) else t
                         for t in trees]
            return super().add_bulk(trees)
