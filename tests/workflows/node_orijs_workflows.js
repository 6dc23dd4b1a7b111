#!/usr/bin/env node
/*
 * A stand-in for a TypeScript OriJS service's workflow side (@orijs/bullmq's
 * BullMQWorkflowProvider), written with the real Node BullMQ (tests/interop/node_modules,
 * put on NODE_PATH by the test). It writes and reads the side keys OriJS keeps beside a
 * flow exactly as ORIJS_CONTRACT.md describes them:
 *   {queuePrefix}:fr:{hash(flowId)}                -> workflow name, EX 900
 *   {queuePrefix}:workflow-failure:{hash(flowId)}  -> the failure text, EX 900
 * where hash is Bun.hash (wyhash, seed 0, UTF-8 bytes) in base 36. Node has no Bun.hash,
 * so wyhash is written here with BigInt (checked against the contract's vectors).
 *
 *   node node_orijs_workflows.js hash '{"texts": [...]}'
 *       -> {hashes: [{decimal, base36}, ...]}
 *   node node_orijs_workflows.js execute '{"url", "queuePrefix", "workflow", "steps", "data",
 *                                          "attempts", "backoff", "wait"}'
 *       Adds the flow as OriJS does (flowId "flow-<ms>-<random>" as the workflow job id,
 *       sequential steps), sets the registry key; with wait, waits for the workflow job
 *       through QueueEvents and reads the failure record (fallback: failedReason).
 *       -> {flowId, outcome?: {state: "completed", result} | {state: "failed", text, decoded}}
 *   node node_orijs_workflows.js status '{"url", "queuePrefix", "flowId"}'
 *       getStatus as OriJS does it: the registry key, then Job.fromId in that queue.
 *       -> {name, state, status}
 *   node node_orijs_workflows.js consume '{"url", "queuePrefix", "workflow", "fail",
 *                                          "rollbacks", "failRollbacks", "count", "readyFile"}'
 *       Runs the workflow's step jobs and workflow jobs as OriJS does; the step named `fail`
 *       throws "card declined"; on a failure the completed steps listed in `rollbacks` roll
 *       back in reverse order (those in `failRollbacks` throw), the failure record is
 *       written, then the step job fails. Exits after `count` flows finished here.
 *       -> {finished}
 *
 * Prints one JSON line on stdout: {"ok": true, "result": ...} or {"ok": false, "error": ...}.
 */
'use strict';

const fs = require('fs');
const { FlowProducer, Job, Queue, QueueEvents, Worker } = require('bullmq');

// -- wyhash (final version, as Zig's std.hash.Wyhash), 64-bit with BigInt ---------------
const MASK = (1n << 64n) - 1n;
const SECRET = [0xa0761d6478bd642fn, 0xe7037ed1a0b428dbn, 0x8ebc6af09c88c6e3n,
  0x589965cc75374cc3n];

function mum(a, b) {
  const product = a * b;
  return [product & MASK, product >> 64n];
}

function mix(a, b) {
  const [low, high] = mum(a, b);
  return low ^ high;
}

function readLE(bytes, at, size) {
  let value = 0n;
  for (let i = size - 1; i >= 0; i -= 1) {
    value = (value << 8n) | BigInt(bytes[at + i]);
  }
  return value;
}

function wyhash(bytes) {
  const n = bytes.length;
  let state = 0n ^ mix(0n ^ SECRET[0], SECRET[1]);
  let a;
  let b;
  if (n <= 16) {
    if (n >= 4) {
      const quarter = (n >> 3) << 2;
      a = (readLE(bytes, 0, 4) << 32n) | readLE(bytes, quarter, 4);
      b = (readLE(bytes, n - 4, 4) << 32n) | readLE(bytes, n - 4 - quarter, 4);
    } else if (n > 0) {
      a = (BigInt(bytes[0]) << 16n) | (BigInt(bytes[n >> 1]) << 8n) | BigInt(bytes[n - 1]);
      b = 0n;
    } else {
      a = 0n;
      b = 0n;
    }
  } else {
    let i = 0;
    if (n > 48) {
      const lanes = [state, state, state];
      for (; i + 48 < n; i += 48) {
        for (let lane = 0; lane < 3; lane += 1) {
          lanes[lane] = mix(readLE(bytes, i + 16 * lane, 8) ^ SECRET[lane + 1],
            readLE(bytes, i + 16 * lane + 8, 8) ^ lanes[lane]);
        }
      }
      state = lanes[0] ^ lanes[1] ^ lanes[2];
    }
    for (; i + 16 < n; i += 16) {
      state = mix(readLE(bytes, i, 8) ^ SECRET[1], readLE(bytes, i + 8, 8) ^ state);
    }
    a = readLE(bytes, n - 16, 8);
    b = readLE(bytes, n - 8, 8);
  }
  [a, b] = mum(a ^ SECRET[1], b ^ state);
  return mix(a ^ SECRET[0] ^ BigInt(n), b ^ SECRET[1]);
}

function hashText(text) {
  return wyhash(Buffer.from(text, 'utf8')).toString(36);
}

// -- the OriJS side keys and failure texts ------------------------------------------------
const TTL = 900;
const registryKey = (prefix, flowId) => `${prefix}:fr:${hashText(flowId)}`;
const failureKey = (prefix, flowId) => `${prefix}:workflow-failure:${hashText(flowId)}`;

function encodeFailure(stepName, message, rollbackErrors) {
  const text = `Step '${stepName}' failed: ${message}`;
  if (rollbackErrors.length === 0) {
    return text;
  }
  return 'ORIJSError:' + JSON.stringify({
    primary: { name: 'WorkflowStepError', message: text, stepName },
    rollbacks: rollbackErrors.map((e) => ({ name: e.name, message: e.message })),
  });
}

function decodeFailure(text) {
  if (!text.startsWith('ORIJSError:')) {
    return { message: text };
  }
  const { primary, rollbacks } = JSON.parse(text.slice('ORIJSError:'.length));
  return { message: primary.message, primary, rollbacks };
}

function flatten(childValues) {
  const results = {};
  for (const value of Object.values(childValues || {})) {
    if (value && value.__stepName !== undefined) {
      Object.assign(results, value.__priorResults, { [value.__stepName]: value.__stepResult });
    } else if (value && value.__parallelResults !== undefined) {
      Object.assign(results, value.__priorResults, value.__parallelResults);
    }
  }
  return results;
}

function connection(url) {
  return { url, maxRetriesPerRequest: null };
}

function done(payload, code) {
  process.stdout.write(JSON.stringify(payload) + '\n', () => process.exit(code));
}

// -- commands -------------------------------------------------------------------------
async function hash(args) {
  return {
    hashes: args.texts.map((text) => {
      const value = wyhash(Buffer.from(text, 'utf8'));
      return { decimal: value.toString(), base36: value.toString(36) };
    }),
  };
}

function buildFlow(args, flowId) {
  const queueName = `${args.queuePrefix}.${args.workflow}`;
  let children = [];
  for (const stepName of args.steps) {
    children = [{
      name: stepName,
      queueName: `${queueName}.steps`,
      data: { type: 'step', version: '1', flowId, stepName, workflowData: args.data },
      opts: { failParentOnFailure: true, attempts: args.attempts, backoff: args.backoff },
      ...(children.length > 0 && { children }),
    }];
  }
  return {
    name: args.workflow,
    queueName,
    data: { type: 'workflow', version: '1', flowId, workflowData: args.data, stepResults: {} },
    opts: { jobId: flowId },
    children,
  };
}

function waitForOutcome(events, flowId, timeout) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no outcome for ${flowId}`)), timeout);
    events.on('completed', ({ jobId, returnvalue }) => {
      if (jobId === flowId) {
        clearTimeout(timer);
        resolve({ state: 'completed', result: returnvalue });
      }
    });
    events.on('failed', ({ jobId, failedReason }) => {
      if (jobId === flowId) {
        clearTimeout(timer);
        resolve({ state: 'failed', failedReason });
      }
    });
  });
}

async function execute(args) {
  const flowId = `flow-${Date.now()}-${Math.random().toString(36).slice(2, 9)}`;
  const queueName = `${args.queuePrefix}.${args.workflow}`;
  const producer = new FlowProducer({ connection: connection(args.url) });
  const events = new QueueEvents(queueName, { connection: connection(args.url) });
  await events.waitUntilReady();
  const outcome = args.wait ? waitForOutcome(events, flowId, 30000) : null;
  await producer.add(buildFlow(args, flowId));
  const client = await producer.client;
  await client.set(registryKey(args.queuePrefix, flowId), args.workflow, 'EX', TTL);
  const result = { flowId };
  if (outcome) {
    const seen = await outcome;
    if (seen.state === 'failed') {
      const record = await client.get(failureKey(args.queuePrefix, flowId));
      const text = record === null ? seen.failedReason : record;
      result.outcome = { state: 'failed', fromRecord: record !== null, text,
        decoded: decodeFailure(text) };
    } else {
      result.outcome = seen;
    }
  }
  await events.close();
  await producer.close();
  return result;
}

const STATUS = { completed: 'completed', failed: 'failed', active: 'running',
  waiting: 'running', 'waiting-children': 'running', delayed: 'running' };

async function status(args) {
  const producer = new FlowProducer({ connection: connection(args.url) });
  const client = await producer.client;
  const name = await client.get(registryKey(args.queuePrefix, args.flowId));
  let state = null;
  if (name !== null) {
    const queue = new Queue(`${args.queuePrefix}.${name}`, { connection: connection(args.url) });
    const job = await Job.fromId(queue, args.flowId);
    state = job ? await job.getState() : null;
    await queue.close();
  }
  await producer.close();
  return { name, state, status: (state && STATUS[state]) || 'pending' };
}

async function rollBack(client, args, job, results) {
  const errors = [];
  for (const stepName of Object.keys(results).reverse()) {
    if (!(args.rollbacks || []).includes(stepName)) {
      continue;
    }
    await client.rpush(`${args.queuePrefix}:node-rollbacks:${job.data.flowId}`, stepName);
    if ((args.failRollbacks || []).includes(stepName)) {
      errors.push(new TypeError(`rollback ${stepName} failed`));
    }
  }
  return errors;
}

async function consume(args) {
  const queueName = `${args.queuePrefix}.${args.workflow}`;
  const opts = { connection: connection(args.url), concurrency: 5 };
  let finished = 0;
  let finish;
  const allDone = new Promise((resolve) => { finish = resolve; });
  const count = () => { finished += 1; if (finished >= args.count) finish(); };
  const steps = new Worker(`${queueName}.steps`, async (job) => {
    const results = flatten(await job.getChildrenValues());
    const { stepName, flowId } = job.data;
    if (stepName !== args.fail) {
      return { __version: '1', __stepName: stepName,
        __stepResult: { by: 'node', step: stepName }, __priorResults: results };
    }
    const client = await steps.client;
    const rollbackErrors = await rollBack(client, args, job, results);
    const text = encodeFailure(stepName, 'card declined', rollbackErrors);
    await client.set(failureKey(args.queuePrefix, flowId), text, 'EX', TTL);
    throw new Error(text);
  }, opts);
  const flows = new Worker(queueName, async (job) => flatten(await job.getChildrenValues()),
    opts);
  steps.on('failed', (job) => { if (job.attemptsMade >= (job.opts.attempts || 1)) count(); });
  flows.on('completed', count);
  await Promise.all([steps.waitUntilReady(), flows.waitUntilReady()]);
  fs.writeFileSync(args.readyFile, 'ready');
  await allDone;
  await Promise.all([steps.close(), flows.close()]);
  return { finished };
}

const [command, rawArgs] = process.argv.slice(2);
const commands = { hash, execute, status, consume };
setTimeout(() => done({ ok: false, error: 'overall timeout (50 s)' }, 2), 50000).unref();
Promise.resolve()
  .then(() => commands[command](JSON.parse(rawArgs)))
  .then((result) => done({ ok: true, result }, 0))
  .catch((err) => done({ ok: false, error: String(err && err.stack ? err.stack : err) }, 1));
