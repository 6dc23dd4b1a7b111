"""orijs_sync[otel] with the real OpenTelemetry SDK, and against a Node BullMQ with
telemetry on (bullmq-otel, tests/interop/otel/): one trace across both languages."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from orijs_sync import Job, Queue, Worker
from orijs_sync.events import BullMQEventProvider, InProcessEventProvider
from orijs_sync.events.queue_manager import QueueManager
from orijs_sync.otel import Telemetry
from orijs_sync.testing import wait_until
from orijs_sync.workflows import BullMQWorkflowProvider, InProcessWorkflowProvider, Workflow

OTEL = Path(__file__).resolve().parent / "otel"


def otel_node(command: str, **args: Any) -> Any:
    node = shutil.which("node")
    if not node or not (OTEL / "node_modules" / "bullmq-otel").is_dir():
        pytest.fail("needs Node and tests/interop/otel's packages: `npm install` there "
                    "(`bash .ci/setup` does it)", pytrace=False)
    proc = subprocess.run([node, "otel.js", command, json.dumps(args)], cwd=str(OTEL),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    reply = json.loads(proc.stdout.strip().splitlines()[-1])
    assert reply["ok"], f"{reply.get('error')}\n{proc.stderr}"
    return reply["result"]


@pytest.fixture
def traced() -> Iterator[Tuple[Telemetry, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Telemetry(tracer_provider=provider), exporter
    provider.shutdown()


def handler(job: Job) -> str:
    if job.name == "bad":
        raise ValueError("bad job")
    return "py"


def test_python_add_then_python_process_is_one_trace(traced, queue, redis_url, qname):
    telemetry, exporter = traced
    ok, bad = telemetry.add(queue, "ok", {}), telemetry.add(queue, "bad", {})
    assert json.loads(queue.get_job(ok.id).opts["tm"])["traceparent"]
    worker = telemetry.instrument_worker(Worker(qname, handler, redis_url, drain_delay=1))
    with worker.start():
        wait_until(lambda: len(exporter.get_finished_spans()) == 4, timeout=30, what="spans")
    spans = {s.name + ":" + s.attributes["bullmq.job.id"]: s for s in exporter.get_finished_spans()}
    for job in (ok, bad):
        add, process = spans[f"add {qname}.{job.name}:{job.id}"], spans[f"process {qname}:{job.id}"]
        assert add.kind == SpanKind.PRODUCER and process.kind == SpanKind.CONSUMER
        assert process.context.trace_id == add.context.trace_id
        assert process.parent.span_id == add.context.span_id
    assert spans[f"process {qname}:{bad.id}"].status.status_code == StatusCode.ERROR


def test_omit_context_starts_a_new_trace(traced, queue, redis_url, qname):
    telemetry, exporter = traced
    job = telemetry.add(queue, "ok", {}, telemetry={"omit_context": True})
    assert "tm" not in queue.get_job(job.id).opts and queue.get_job(job.id).opts["omc"] is True
    worker = telemetry.instrument_worker(Worker(qname, handler, redis_url, drain_delay=1))
    with worker.start():
        wait_until(lambda: len(exporter.get_finished_spans()) == 2, timeout=30, what="spans")
    process = [s for s in exporter.get_finished_spans() if s.name.startswith("process")][0]
    assert process.parent is None


def test_node_continues_a_python_trace(traced, redis_url, namespace):
    telemetry, exporter = traced
    name = f"otel-py-node-{namespace}"
    with Queue(name, redis_url) as queue:
        job = telemetry.add(queue, "hello", {"from": "python"})
    add = exporter.get_finished_spans()[0]
    node_spans = otel_node("work", url=redis_url, queue=name, count=1)["spans"]
    process = [s for s in node_spans if s["name"] == f"process {name}"]
    assert len(process) == 1, node_spans
    assert process[0]["traceId"] == format(add.context.trace_id, "032x")
    assert process[0]["parentSpanId"] == format(add.context.span_id, "016x")
    assert job.id


def test_python_continues_a_node_trace(traced, redis_url, namespace):
    telemetry, exporter = traced
    name = f"otel-node-py-{namespace}"
    added = otel_node("add", url=redis_url, queue=name, name="hello")
    node_add = [s for s in added["spans"] if s["name"] == f"add {name}.hello"][0]
    worker = telemetry.instrument_worker(Worker(name, handler, redis_url, drain_delay=1))
    with worker.start():
        wait_until(lambda: len(exporter.get_finished_spans()) == 1, timeout=30, what="span")
    process = exporter.get_finished_spans()[0]
    assert process.attributes["bullmq.job.id"] == added["jobId"]
    assert format(process.context.trace_id, "032x") == node_add["traceId"]
    assert format(process.parent.span_id, "016x") == node_add["spanId"]


def test_emit_and_execute_spans(traced):
    telemetry, exporter = traced
    events = InProcessEventProvider()
    events.subscribe("order.created", lambda message: {"ok": message.payload["id"]})
    workflows = InProcessWorkflowProvider()
    order = Workflow("Order").step("charge", lambda ctx: {"charged": ctx.data["id"]})
    workflows.register(order)
    with events, workflows:
        assert telemetry.emit(events, "order.created", {"id": 7}).result(timeout=10) == {"ok": 7}
        handle = telemetry.execute(workflows, order, {"id": 8})
        assert handle.result(timeout=10)["charge"] == {"charged": 8}
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["emit order.created"].kind == SpanKind.PRODUCER
    assert spans["execute Order"].attributes["orijs.workflow.name"] == "Order"


def test_the_event_layer_carries_the_trace_through_traced_classes(traced, redis_url, namespace):
    telemetry, exporter = traced
    manager = QueueManager(redis_url, queue_prefix=f"ev{namespace}",
                           queue_class=telemetry.queue_class(),
                           worker_class=telemetry.worker_class())
    provider = BullMQEventProvider(redis_url, queue_manager=manager)
    provider.subscribe("order.created", lambda message: {"ok": message.payload["id"]})
    with provider:
        assert telemetry.emit(provider, "order.created", {"id": 3}).result(timeout=20) == {"ok": 3}
        wait_until(lambda: any(s.name.startswith("process") for s in exporter.get_finished_spans()),
                   timeout=20, what="the process span")
    spans = {s.name.split(" ")[0]: s for s in exporter.get_finished_spans()}
    emit, add, process = spans["emit"], spans["add"], spans["process"]
    assert add.parent.span_id == emit.context.span_id
    assert process.parent.span_id == add.context.span_id
    assert len({emit.context.trace_id, add.context.trace_id, process.context.trace_id}) == 1


def test_a_workflows_step_jobs_continue_the_execute_trace(traced, redis_url, namespace):
    telemetry, exporter = traced
    provider = BullMQWorkflowProvider(redis_url, queue_prefix=f"wf{namespace}",
                                      flow_producer_class=telemetry.flow_producer_class(),
                                      worker_class=telemetry.worker_class())
    order = Workflow("Order").step("reserve", lambda ctx: {"reserved": ctx.data["id"]}) \
        .step("charge", lambda ctx: {"charged": ctx.data["id"]})
    provider.register(order)
    with provider:
        handle = telemetry.execute(provider, order, {"id": 9})
        assert handle.result(timeout=30)["charge"] == {"charged": 9}
        wait_until(lambda: len([s for s in exporter.get_finished_spans()
                                if s.name.startswith("process")]) >= 3,
                   timeout=20, what="process spans of both steps and the workflow job")
    spans = exporter.get_finished_spans()
    execute = next(s for s in spans if s.name == "execute Order")
    add = next(s for s in spans if s.name.startswith("add flow"))
    processes = [s for s in spans if s.name.startswith("process")]
    assert add.parent.span_id == execute.context.span_id
    assert all(p.context.trace_id == execute.context.trace_id for p in processes)
    assert all(p.parent.span_id == add.context.span_id for p in processes)
