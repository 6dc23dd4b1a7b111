#!/usr/bin/env node
/*
 * Node BullMQ with OpenTelemetry on (bullmq-otel, W3C trace context), for orijs_sync's
 * otel tests. Prints one JSON line {"ok": true, "result": ...}.
 *
 *   node otel.js add  '{"url", "queue", "name"}'       -> {jobId, spans}
 *   node otel.js work '{"url", "queue", "count"}'      -> {spans}  (after `count` jobs)
 * spans: [{name, kind, traceId, spanId, parentSpanId}], as the in-memory exporter saw them.
 */
'use strict';

const api = require('@opentelemetry/api');
const { AsyncHooksContextManager } = require('@opentelemetry/context-async-hooks');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { Queue, Worker } = require('bullmq');
const { BullMQOtel } = require('bullmq-otel');

const exporter = new InMemorySpanExporter();
api.trace.setGlobalTracerProvider(new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(exporter)],
}));
api.context.setGlobalContextManager(new AsyncHooksContextManager().enable());
api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());

function out(payload, code) {
  process.stdout.write(JSON.stringify(payload) + '\n', () => process.exit(code));
}

function spans() {
  return exporter.getFinishedSpans().map((s) => ({
    name: s.name,
    kind: s.kind,
    traceId: s.spanContext().traceId,
    spanId: s.spanContext().spanId,
    parentSpanId: s.parentSpanContext ? s.parentSpanContext.spanId : (s.parentSpanId || null),
  }));
}

function opts(args) {
  return { connection: { url: args.url, maxRetriesPerRequest: null },
           telemetry: new BullMQOtel('orijs-interop') };
}

const commands = {
  async add(args) {
    const queue = new Queue(args.queue, opts(args));
    const job = await queue.add(args.name, { from: 'node' });
    await queue.close();
    return { jobId: job.id, spans: spans() };
  },
  async work(args) {
    let done = 0;
    let finish;
    const finished = new Promise((resolve) => { finish = resolve; });
    const worker = new Worker(args.queue, async () => 'node', opts(args));
    worker.on('completed', () => { done += 1; if (done >= args.count) finish(); });
    const timer = setTimeout(finish, (args.timeout || 30) * 1000);
    await finished;
    clearTimeout(timer);
    await worker.close();
    return { processed: done, spans: spans() };
  },
};

commands[process.argv[2]](JSON.parse(process.argv[3] || '{}'))
  .then((result) => out({ ok: true, result }, 0))
  .catch((err) => out({ ok: false, error: String(err && err.message), stack: String(err && err.stack) }, 1));
