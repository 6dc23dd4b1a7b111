#!/usr/bin/env node
/*
 * BullMQ's monitoring calls, for orijs_sync's tests (same protocol as driver.js:
 * one JSON line {"ok": true, "result": ...} on stdout).
 *
 *   node monitoring.js getWorkers '{"url", "queue", "prefix"?}'  -> [{name, rawname}]
 *   node monitoring.js getMetrics '{"url", "queue", "type", "start"?, "end"?}'
 *                                 -> BullMQ's {meta: {count, prevTS, prevCount}, data, count}
 *   node monitoring.js workUntil  '{"url", "queue", "stopFile", "name"?, "maxDataPoints"?,
 *                                   "readyFile"}'
 *        runs a Worker (jobs named "fail*" throw) until stopFile exists -> {processed}
 */
'use strict';

const fs = require('fs');
const { Queue, Worker } = require('bullmq');

function out(payload, code) {
  process.stdout.write(JSON.stringify(payload) + '\n', () => process.exit(code));
}

function opts(args) {
  return { connection: { url: args.url, maxRetriesPerRequest: null },
           prefix: args.prefix || 'bull' };
}

const commands = {
  async getWorkers(args) {
    const queue = new Queue(args.queue, opts(args));
    try {
      const workers = await queue.getWorkers();
      return workers.map((w) => ({ name: w.name, rawname: w.rawname }));
    } finally {
      await queue.close();
    }
  },
  async getMetrics(args) {
    const queue = new Queue(args.queue, opts(args));
    try {
      return await queue.getMetrics(args.type, args.start || 0, args.end === undefined ? -1 : args.end);
    } finally {
      await queue.close();
    }
  },
  async workUntil(args) {
    let processed = 0;
    const workerOpts = Object.assign(opts(args), { concurrency: 1 });
    if (args.name) workerOpts.name = args.name;
    if (args.maxDataPoints) workerOpts.metrics = { maxDataPoints: args.maxDataPoints };
    const worker = new Worker(args.queue, async (job) => {
      processed += 1;
      if (job.name.startsWith('fail')) throw new Error(`failed ${job.name}`);
      return { ok: job.id };
    }, workerOpts);
    await worker.waitUntilReady();
    fs.writeFileSync(args.readyFile, 'ready');
    const deadline = Date.now() + (args.timeout || 60) * 1000;
    while (!fs.existsSync(args.stopFile) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await worker.close();
    return { processed };
  },
};

async function main() {
  const [command, json] = process.argv.slice(2);
  const args = JSON.parse(json || '{}');
  if (!commands[command]) throw new Error(`unknown command ${command}`);
  out({ ok: true, result: await commands[command](args) }, 0);
}

main().catch((err) => out({ ok: false, error: String(err && err.message), stack: String(err && err.stack) }, 1));
