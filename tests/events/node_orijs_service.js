#!/usr/bin/env node
/*
 * A stand-in for an OriJS (TypeScript) service, written with the real Node BullMQ
 * (tests/interop/node_modules, put on NODE_PATH by the test). It writes and reads
 * events exactly as @orijs/bullmq's BullMQEventProvider does.
 *
 *   node node_orijs_service.js serve '{"url", "queue", "count", "readyFile", "startFile"?}'
 *       A Worker on `queue`; each job's return value is {handledBy: "node", envelope: job.data}.
 *       Writes readyFile once the worker is ready; exits after `count` completed jobs.
 *       With startFile, registers first and starts last, as an OriJS service does: the
 *       worker is created without running, readyFile is written, and it runs once
 *       startFile exists.
 *   node node_orijs_service.js emit '{"url", "queue", "envelope"}'
 *       queue.add("event", envelope, {jobId, attempts: 3, backoff: exponential 1000 ms}),
 *       waits for the outcome through QueueEvents, prints {returnvalue} or {failedReason}.
 *
 * Prints one JSON line on stdout: {"ok": true, "result": ...} or {"ok": false, "error": ...}.
 */
'use strict';

const fs = require('fs');
const { Queue, Worker, QueueEvents } = require('bullmq');

function connection(url) {
  return { url, maxRetriesPerRequest: null };
}

function done(payload, code) {
  process.stdout.write(JSON.stringify(payload) + '\n', () => process.exit(code));
}

function fileExists(path) {
  return new Promise((resolve) => {
    const poll = setInterval(() => {
      if (fs.existsSync(path)) {
        clearInterval(poll);
        resolve();
      }
    }, 20);
  });
}

async function serve(args) {
  let completed = 0;
  const worker = new Worker(args.queue, async (job) => ({ handledBy: 'node', envelope: job.data }),
                            { connection: connection(args.url), concurrency: 10,
                              autorun: !args.startFile });
  const finished = new Promise((resolve) => {
    worker.on('completed', () => {
      completed += 1;
      if (completed >= args.count) {
        resolve();
      }
    });
  });
  await worker.waitUntilReady();
  fs.writeFileSync(args.readyFile, 'ready');
  if (args.startFile) {
    await fileExists(args.startFile);
    worker.run();
  }
  await finished;
  await worker.close();
  return { completed };
}

async function emit(args) {
  const queue = new Queue(args.queue, { connection: connection(args.url) });
  const events = new QueueEvents(args.queue, { connection: connection(args.url) });
  await events.waitUntilReady();
  const envelope = args.envelope;
  const job = await queue.add('event', envelope, {
    attempts: 3,
    backoff: { type: 'exponential', delay: 1000 },
    jobId: envelope.idempotencyKey || envelope.eventId,
  });
  let result;
  try {
    result = { returnvalue: await job.waitUntilFinished(events, 20000) };
  } catch (err) {
    result = { failedReason: err.message };
  }
  await events.close();
  await queue.close();
  return result;
}

const [command, rawArgs] = process.argv.slice(2);
const commands = { serve, emit };
setTimeout(() => done({ ok: false, error: 'overall timeout (40 s)' }, 2), 40000).unref();
Promise.resolve()
  .then(() => commands[command](JSON.parse(rawArgs)))
  .then((result) => done({ ok: true, result }, 0))
  .catch((err) => done({ ok: false, error: String(err && err.stack ? err.stack : err) }, 1));
