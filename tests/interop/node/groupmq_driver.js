#!/usr/bin/env node
/*
 * The Node GroupMQ side of orijs_sync's group queue interop tests.
 *
 *   node groupmq_driver.js <command> '<json args>'
 *
 * Prints one JSON line on stdout: {"ok": true, "result": ...} (exit 0) or
 * {"ok": false, "error": "...", "stack": "..."} (exit 1; 2 on the overall timeout).
 *
 * Common args: url (redis URL), namespace, timeout (seconds, overall guard; default 30),
 * queueOpts (extra GroupMQ Queue options: jobTimeoutMs, maxAttempts, keepCompleted...).
 *
 * Commands:
 *   add    {jobs: [{groupId, data, orderMs?, jobId?, maxAttempts?, delay?}], together?}
 *          -> [job.toJSON()]   (together: every add at once, for queueOpts.autoBatch)
 *   getJob {id}                                                     -> job.toJSON() | null
 *   counts {}                                                       -> queue.getJobCounts()
 *   clean  {status, graceMs?, limit?}              -> queue.clean(graceMs, limit, status)
 *   reserve {batch?}        -> [ReservedJob] (queue.reserve(), or reserveBatch(batch))
 *   heartbeat {id, groupId, extendMs?}            -> queue.heartbeat(job, extendMs)
 *   complete {job: ReservedJob, result}           -> queue.completeWithMetadata(...)
 *   deadLetter {job: ReservedJob, message}        -> recordFinalFailure, then deadLetter
 *                                                    (as GroupMQ's worker does)
 *   retry  {id, backoffMs?}    -> queue.retry(id, backoffMs) (the low-level failed attempt)
 *   jobsByStatus {statuses, start?, end?}  -> [job.toJSON()] (queue.getJobsByStatus)
 *   cleanup {}                                     -> queue.cleanup()
 *   work   {concurrency, log?, sleepMs?, readyFile?, until: "empty" | number,
 *           workerOpts?}
 *          Runs a Worker. Its handler RPUSHes "start|id|group|n|node" and "end|..." to the
 *          list `log` (n = data.n), sleeps sleepMs, throws Error(data.message) when
 *          data.fail is true and attempts < data.failTimes (default: always), else
 *          returns {"echo": data, "by": "node"}. Stops when the queue is empty (after
 *          doing at least one job) or after `until` jobs completed.
 *          -> {completed: [ids], failed: [ids]}
 */
'use strict';

const fs = require('fs');
const IORedis = require('ioredis');
const { Queue, Worker } = require('groupmq');

let finished = false;

function emit(payload, code) {
  if (finished) return;
  finished = true;
  process.stdout.write(JSON.stringify(payload) + '\n', () => process.exit(code));
  setTimeout(() => process.exit(code), 2000).unref();
}

function fail(err, code = 1) {
  emit({ ok: false, error: err && err.message ? err.message : String(err),
         stack: err && err.stack ? String(err.stack) : null }, code);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function makeQueue(args) {
  const redis = new IORedis(args.url, { maxRetriesPerRequest: null });
  return new Queue({ redis, namespace: args.namespace, ...(args.queueOpts || {}) });
}

async function add(args) {
  const queue = makeQueue(args);
  let out = [];
  if (args.together) {
    out = (await Promise.all(args.jobs.map((job) => queue.add(job)))).map((j) => j.toJSON());
  } else {
    for (const job of args.jobs) {
      out.push((await queue.add(job)).toJSON());
    }
  }
  await queue.close();
  return out;
}

async function withQueue(args, fn) {
  const queue = makeQueue(args);
  try {
    return await fn(queue);
  } finally {
    await queue.close();
  }
}

const reserve = (args) => withQueue(args, async (queue) => {
  if (args.batch) return queue.reserveBatch(args.batch);
  const job = await queue.reserve();
  return job ? [job] : [];
});

const heartbeat = (args) => withQueue(args, (queue) =>
  queue.heartbeat({ id: args.id, groupId: args.groupId }, args.extendMs));

const complete = (args) => withQueue(args, async (queue) => {
  const now = Date.now();
  await queue.completeWithMetadata(args.job, args.result, {
    processedOn: now, finishedOn: now, attempts: args.job.attempts,
    maxAttempts: args.job.maxAttempts });
  return true;
});

const deadLetter = (args) => withQueue(args, async (queue) => {
  const now = Date.now();
  const err = new Error(args.message);
  await queue.recordFinalFailure(args.job, { name: err.name, message: err.message, stack: err.stack },
    { processedOn: now, finishedOn: now, attempts: args.job.attempts + 1,
      maxAttempts: args.job.maxAttempts, data: args.job.data });
  return queue.deadLetter(args.job.id, args.job.groupId);
});

const retry = (args) => withQueue(args, (queue) => queue.retry(args.id, args.backoffMs || 0));

const jobsByStatus = (args) => withQueue(args, async (queue) =>
  (await queue.getJobsByStatus(args.statuses, args.start, args.end)).map((j) => j.toJSON()));

const cleanup = (args) => withQueue(args, (queue) => queue.cleanup());

async function getJob(args) {
  const queue = makeQueue(args);
  try {
    return (await queue.getJob(args.id)).toJSON();
  } catch (err) {
    return null;
  } finally {
    await queue.close();
  }
}

async function counts(args) {
  const queue = makeQueue(args);
  const result = await queue.getJobCounts();
  await queue.close();
  return result;
}

async function work(args) {
  const queue = makeQueue(args);
  const logClient = new IORedis(args.url);
  const completed = [];
  const failed = [];
  const record = (kind, job) => args.log
    ? logClient.rpush(args.log, [kind, job.id, job.groupId, job.data && job.data.n, 'node'].join('|'))
    : Promise.resolve();
  const worker = new Worker({
    queue,
    concurrency: args.concurrency || 1,
    backoff: () => 50,
    blockingTimeoutSec: 1,
    ...(args.workerOpts || {}),
    handler: async (job) => {
      await record('start', job);
      if (args.sleepMs) await sleep(args.sleepMs);
      const data = job.data || {};
      const failing = data.fail && (data.failTimes === undefined || job.attempts < data.failTimes);
      await record('end', job);
      if (failing) throw new Error(data.message || 'node failed');
      return { echo: data, by: 'node' };
    },
  });
  worker.on('completed', (job) => completed.push(job.id));
  worker.on('failed', (job) => failed.push(job.id));
  worker.on('error', () => {});
  if (args.readyFile) fs.writeFileSync(args.readyFile, 'ready');
  for (;;) {
    await sleep(100);
    if (typeof args.until === 'number') {
      if (completed.length >= args.until) break;
    } else if (completed.length + failed.length > 0 && (await queue.waitForEmpty(1))) {
      break;
    }
  }
  await worker.close(5000);
  await logClient.quit();
  await queue.close();
  return { completed, failed };
}

async function clean(args) {
  const queue = makeQueue(args);
  try {
    return await queue.clean(args.graceMs || 0, args.limit || 1000, args.status);
  } finally {
    await queue.close();
  }
}

const COMMANDS = { add, getJob, counts, clean, work, reserve, heartbeat, complete, deadLetter,
                   retry, jobsByStatus, cleanup };

async function main() {
  const [command, raw] = process.argv.slice(2);
  const args = raw ? JSON.parse(raw) : {};
  const handler = COMMANDS[command];
  if (!handler) throw new Error(`unknown command ${command}`);
  const guard = setTimeout(() => fail(new Error(`timed out after ${args.timeout || 30} s`), 2),
                           (args.timeout || 30) * 1000);
  guard.unref();
  emit({ ok: true, result: await handler(args) }, 0);
}

main().catch((err) => fail(err));
