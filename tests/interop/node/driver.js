#!/usr/bin/env node
/*
 * The Node BullMQ side of orijs_sync's interop tests.
 *
 *   node driver.js <command> '<json args>'
 *
 * Prints exactly one JSON line on stdout:
 *   {"ok": true, "result": ...}                      exit code 0
 *   {"ok": false, "error": "...", "stack": "..."}    exit code 1 (2 on the overall timeout)
 * Anything else (BullMQ warnings, diagnostics) goes to stderr.
 *
 * Common args: url (redis URL; default $REDIS_URL), queue, prefix (default "bull"),
 * cluster (a list of {host, port}: a Redis Cluster through ioredis's Cluster, instead of url),
 * timeout (seconds, overall guard for the whole command; default 30).
 *
 * Commands:
 *   add               {name, data, opts}                -> {id, name, timestamp, opts}
 *   addBulk           {jobs: [{name, data, opts}]}      -> [id, ...]
 *   addFlow           {name, data, opts, children: [{name, data, opts, queue?}]}
 *                                                       -> {id, children: [id, ...]}
 *   work              {count, concurrency, workTimeout, workerOpts?} -> {results: [...], timedOut}
 *                     workerOpts: extra BullMQ Worker options (stalledInterval, lockDuration...)
 *                     handler: names starting with "fail" throw Error(data.message || ...),
 *                     every other job returns {"echo": data}. Stops after `count` jobs reach a
 *                     final state (completed, or failed with no retry left).
 *                     holdFile (optional): each job's handler waits until this file exists.
 *   getJob            {id}                              -> job fields (or null)
 *   counts            {types?}                          -> getJobCounts(...types)
 *   waitUntilFinished {id, waitTimeout, readyFile?}     -> {returnvalue} | {error: failedReason}
 *                     writes readyFile (if given) once its QueueEvents listens
 *   watchJob {id, readyFile?}  -> {progress: [...], returnvalue, logs}: the job's progress
 *                     events and completion seen by QueueEvents, then its logs
 *   pause / resume    {}                                -> {paused}
 *   isPaused          {}                                -> {paused}
 *   queueCalls        {calls: [{method, args}], queueOpts?} -> [result, ...]: each
 *                     queue[method](...args) in turn on one Queue (a Job in a result
 *                     as its id); queueOpts: extra Queue options (skipMetasUpdate:
 *                     true keeps BullMQ's Queue from writing the meta hash; streams)
 *   jobCalls          {ids, calls: [{method, args}]}     -> {id: [result, ...]}: each
 *                     job[method](...args) in turn on each job (null for a missing one)
 *   flow and job scheduler commands: see the comment above `flowCommands` below
 *   manualProcess, moveWithToken, extendLock, manualTake: manual processing, see
 *                     manual_commands.js
 *
 * More commands, listed in their blocks below: flows and job schedulers (addFlowTree,
 * workFlow, flowInfo, getFlow, upsertJobScheduler, getJobSchedulers, getJobScheduler,
 * removeJobScheduler); limits and bulk actions (limits, setLimits, workTimed, retryJobs,
 * promoteJobs, removeJob, removeUnprocessedChildren, failedChildrenValues).
 */
'use strict';

const fs = require('fs');
const { Queue, Worker, QueueEvents, FlowProducer } = require('bullmq');
const { manualCommands } = require('./manual_commands');

const DEFAULT_TIMEOUT_S = 30;

let finished = false;

function emit(payload, code) {
  if (finished) {
    return;
  }
  finished = true;
  process.stdout.write(JSON.stringify(payload) + '\n', () => process.exit(code));
  // If stdout never drains, still leave.
  setTimeout(() => process.exit(code), 2000).unref();
}

function fail(err, code = 1) {
  const message = err && err.message ? err.message : String(err);
  emit({ ok: false, error: message, stack: err && err.stack ? String(err.stack) : null }, code);
}

function connectionFrom(args) {
  if (Array.isArray(args.cluster)) {
    // A Redis Cluster: an ioredis Cluster on these startup nodes ({host, port}).
    const { Cluster } = require('ioredis');
    return new Cluster(args.cluster, {
      enableOfflineQueue: true,
      redisOptions: { maxRetriesPerRequest: null },
    });
  }
  const url = args.url || process.env.REDIS_URL;
  if (!url) {
    throw new Error('no redis URL: pass "url" in the JSON args or set REDIS_URL');
  }
  // BullMQ hands `url` to ioredis; workers need maxRetriesPerRequest: null.
  return { url, maxRetriesPerRequest: null, enableOfflineQueue: true };
}

function baseOpts(args) {
  if (!args.queue) {
    throw new Error('"queue" is required');
  }
  return { connection: connectionFrom(args), prefix: args.prefix || 'bull' };
}

function orNull(value) {
  return value === undefined ? null : value;
}

async function closeAll(closables) {
  // Close in reverse order of creation; never let a close hang the command.
  for (const c of closables.reverse()) {
    try {
      await Promise.race([c.close(), new Promise((r) => setTimeout(r, 5000))]);
    } catch (err) {
      process.stderr.write(`close failed: ${err && err.message}\n`);
    }
  }
}

async function untilFileExists(path) {
  while (path && !fs.existsSync(path)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function jobFields(job, state) {
  return {
    id: orNull(job.id),
    name: orNull(job.name),
    data: orNull(job.data),
    opts: orNull(job.opts),
    progress: orNull(job.progress),
    delay: orNull(job.delay),
    priority: orNull(job.priority),
    timestamp: orNull(job.timestamp),
    attemptsMade: orNull(job.attemptsMade),
    attemptsStarted: orNull(job.attemptsStarted),
    stalledCounter: orNull(job.stalledCounter),
    processedOn: orNull(job.processedOn),
    finishedOn: orNull(job.finishedOn),
    returnvalue: orNull(job.returnvalue),
    failedReason: orNull(job.failedReason),
    stacktrace: orNull(job.stacktrace),
    parentKey: orNull(job.parentKey),
    parent: orNull(job.parent),
    repeatJobKey: orNull(job.repeatJobKey),
    deduplicationId: orNull(job.deduplicationId),
    processedBy: orNull(job.processedBy),
    state: orNull(state),
  };
}

const commands = {
  async add(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    const job = await queue.add(args.name, args.data === undefined ? {} : args.data, args.opts || {});
    return { id: job.id, name: job.name, timestamp: job.timestamp, opts: job.opts };
  },

  async addBulk(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    const jobs = await queue.addBulk(
      (args.jobs || []).map((j) => ({ name: j.name, data: j.data === undefined ? {} : j.data, opts: j.opts || {} })),
    );
    return jobs.map((j) => j.id);
  },

  async addFlow(args, closables) {
    const base = baseOpts(args);
    const flow = new FlowProducer({ connection: base.connection, prefix: base.prefix });
    closables.push(flow);
    const tree = await flow.add({
      name: args.name,
      queueName: args.queue,
      data: args.data === undefined ? {} : args.data,
      opts: args.opts || {},
      children: (args.children || []).map((c) => ({
        name: c.name,
        queueName: c.queue || args.queue,
        data: c.data === undefined ? {} : c.data,
        opts: c.opts || {},
      })),
    });
    return { id: tree.job.id, children: (tree.children || []).map((c) => c.job.id) };
  },

  async work(args, closables) {
    const count = Number.isInteger(args.count) ? args.count : 1;
    const workTimeoutMs = Math.round((args.workTimeout || 20) * 1000);
    const results = [];
    let done = 0;
    let resolveDone;
    const allDone = new Promise((resolve) => {
      resolveDone = resolve;
    });
    const record = (entry, final) => {
      results.push(entry);
      if (final) {
        done += 1;
        if (done >= count) {
          resolveDone(false);
        }
      }
    };
    if (count <= 0) {
      resolveDone(false);
    }
    const worker = new Worker(
      args.queue,
      async (job) => {
        await untilFileExists(args.holdFile);
        if (typeof job.name === 'string' && job.name.startsWith('fail')) {
          const message = job.data && typeof job.data.message === 'string' ? job.data.message : `node failed ${job.name}`;
          throw new Error(message);
        }
        return { echo: job.data === undefined ? null : job.data };
      },
      Object.assign(baseOpts(args), {
        concurrency: args.concurrency || 1,
        autorun: false,
        // A short drain delay so close() does not wait long on the blocking call.
        drainDelay: 1,
      }, args.workerOpts || {}),
    );
    closables.push(worker);
    worker.on('completed', (job, returnvalue) => {
      record(
        {
          id: job.id,
          name: job.name,
          status: 'completed',
          returnvalue: orNull(returnvalue),
          attemptsMade: orNull(job.attemptsMade),
          final: true,
        },
        true,
      );
    });
    worker.on('failed', (job, err) => {
      if (!job) {
        return;
      }
      // BullMQ sets finishedOn only when the job will not be retried.
      const final = Boolean(job.finishedOn);
      record(
        {
          id: job.id,
          name: job.name,
          status: 'failed',
          failedReason: err && err.message ? err.message : String(err),
          attemptsMade: orNull(job.attemptsMade),
          final,
        },
        final,
      );
    });
    worker.on('error', (err) => {
      process.stderr.write(`worker error: ${err && err.stack ? err.stack : err}\n`);
    });
    worker.run().catch((err) => process.stderr.write(`worker.run failed: ${err && err.stack}\n`));
    const timer = new Promise((resolve) => setTimeout(() => resolve(true), workTimeoutMs).unref());
    const timedOut = await Promise.race([allDone, timer]);
    await worker.close();
    return { results, timedOut };
  },

  async getJob(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    const job = await queue.getJob(String(args.id));
    if (!job) {
      return null;
    }
    const state = await job.getState();
    return jobFields(job, state);
  },

  async counts(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    const types = Array.isArray(args.types) ? args.types : [];
    return queue.getJobCounts(...types);
  },

  async waitUntilFinished(args, closables) {
    const base = baseOpts(args);
    const queue = new Queue(args.queue, base);
    closables.push(queue);
    const events = new QueueEvents(args.queue, { connection: base.connection, prefix: base.prefix });
    closables.push(events);
    await events.waitUntilReady();
    const job = await queue.getJob(String(args.id));
    if (!job) {
      throw new Error(`job ${args.id} not found in queue ${args.queue}`);
    }
    const waitMs = Math.round((args.waitTimeout || 20) * 1000);
    const pending = job.waitUntilFinished(events, waitMs).then(
      (returnvalue) => ({ returnvalue: orNull(returnvalue) }),
      (err) => ({ error: err && err.message ? err.message : String(err) }),
    );
    if (args.readyFile) {
      fs.writeFileSync(args.readyFile, 'ready\n');
    }
    return pending;
  },

  async watchJob(args, closables) {
    const base = baseOpts(args);
    const events = new QueueEvents(args.queue, { connection: base.connection, prefix: base.prefix });
    closables.push(events);
    await events.waitUntilReady();
    const id = String(args.id);
    const progress = [];
    events.on('progress', ({ jobId, data }) => {
      if (jobId === id) {
        progress.push(data);
      }
    });
    const done = new Promise((resolve) => {
      events.on('completed', ({ jobId, returnvalue }) => {
        if (jobId === id) {
          resolve(returnvalue);
        }
      });
    });
    if (args.readyFile) {
      fs.writeFileSync(args.readyFile, 'ready\n');
    }
    const returnvalue = await done;
    const queue = new Queue(args.queue, base);
    closables.push(queue);
    const logs = await queue.getJobLogs(id);
    return { progress, returnvalue: orNull(returnvalue), logs: logs.logs };
  },

  async pause(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    await queue.pause();
    return { paused: await queue.isPaused() };
  },

  async resume(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    await queue.resume();
    return { paused: await queue.isPaused() };
  },

  async isPaused(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    return { paused: await queue.isPaused() };
  },

  async queueCalls(args, closables) {
    const queue = new Queue(args.queue, Object.assign(baseOpts(args), args.queueOpts || {}));
    closables.push(queue);
    const results = [];
    for (const call of args.calls || []) {
      results.push(callResult(await queue[call.method](...(call.args || []))));
    }
    return results;
  },

  async jobCalls(args, closables) {
    const queue = new Queue(args.queue, Object.assign(baseOpts(args), { skipMetasUpdate: true }));
    closables.push(queue);
    const byId = {};
    for (const id of args.ids || []) {
      const job = await queue.getJob(String(id));
      byId[id] = job ? [] : null;
      for (const call of job ? args.calls || [] : []) {
        byId[id].push(callResult(await job[call.method](...(call.args || []))));
      }
    }
    return byId;
  },
};

// A call's result as JSON: a Job as its id, undefined as null.
function callResult(value) {
  if (Array.isArray(value)) {
    return value.map(callResult);
  }
  if (value && typeof value === 'object' && typeof value.queueQualifiedName === 'string') {
    return value.id;
  }
  return orNull(value);
}

/*
 * Flow and job scheduler commands (tests/interop/test_interop_flows.py):
 *
 *   addFlowTree        {tree: {name, queue, data, opts, children: [...]}} (nested, any depth)
 *                                                       -> {id, queue, children: [...]} (same shape)
 *   workFlow           {count, concurrency, workTimeout} -> as `work`; the handler fails names
 *                      starting with "fail", else returns {echo: data, children: getChildrenValues(),
 *                      ignored: getIgnoredChildrenFailures()}
 *   flowInfo           {id}                              -> {state, failedReason, childrenValues,
 *                      ignored, dependencies, counts, parentKey, parent} (or null)
 *   getFlow            {id, depth?, maxChildren?}        -> {id, name, queue, children: [...]}
 *   upsertJobScheduler {id, repeat, template?}           -> {id, delay, opts} of the next run's job
 *   getJobSchedulers   {}                                -> getJobSchedulers(0, -1, true)
 *   getJobScheduler    {id}                              -> getJobScheduler(id) (or null)
 *   removeJobScheduler {id}                              -> {removed}
 */
function flowNode(node, defaultQueue) {
  const queueName = node.queue || defaultQueue;
  return {
    name: node.name,
    queueName,
    data: node.data === undefined ? {} : node.data,
    opts: node.opts || {},
    children: (node.children || []).map((c) => flowNode(c, queueName)),
  };
}

function treeIds(tree) {
  return {
    id: tree.job.id,
    queue: tree.job.queueName,
    children: (tree.children || []).map(treeIds),
  };
}

function flowTreeOut(tree) {
  return {
    id: tree.job.id,
    name: tree.job.name,
    queue: tree.job.queueName,
    children: (tree.children || []).map(flowTreeOut),
  };
}

const flowCommands = {
  async addFlowTree(args, closables) {
    const base = baseOpts(Object.assign({ queue: args.tree && args.tree.queue }, args));
    const flow = new FlowProducer({ connection: base.connection, prefix: base.prefix });
    closables.push(flow);
    const tree = await flow.add(flowNode(args.tree));
    return treeIds(tree);
  },

  async workFlow(args, closables) {
    const count = Number.isInteger(args.count) ? args.count : 1;
    const workTimeoutMs = Math.round((args.workTimeout || 20) * 1000);
    const results = [];
    let done = 0;
    let resolveDone;
    const allDone = new Promise((resolve) => {
      resolveDone = resolve;
    });
    const record = (entry) => {
      results.push(entry);
      if (entry.final) {
        done += 1;
        if (done >= count) {
          resolveDone(false);
        }
      }
    };
    const worker = new Worker(
      args.queue,
      async (job) => {
        if (typeof job.name === 'string' && job.name.startsWith('fail')) {
          const message = job.data && typeof job.data.message === 'string' ? job.data.message : `node failed ${job.name}`;
          throw new Error(message);
        }
        return {
          echo: job.data === undefined ? null : job.data,
          children: (await job.getChildrenValues()) || {},
          ignored: (await job.getIgnoredChildrenFailures()) || {},
        };
      },
      Object.assign(baseOpts(args), { concurrency: args.concurrency || 1, autorun: false, drainDelay: 1 }),
    );
    closables.push(worker);
    worker.on('completed', (job, returnvalue) => {
      record({ id: job.id, name: job.name, status: 'completed', returnvalue: orNull(returnvalue), final: true });
    });
    worker.on('failed', (job, err) => {
      if (!job) {
        return;
      }
      record({
        id: job.id,
        name: job.name,
        status: 'failed',
        failedReason: err && err.message ? err.message : String(err),
        final: Boolean(job.finishedOn),
      });
    });
    worker.on('error', (err) => {
      process.stderr.write(`worker error: ${err && err.stack ? err.stack : err}\n`);
    });
    worker.run().catch((err) => process.stderr.write(`worker.run failed: ${err && err.stack}\n`));
    const timer = new Promise((resolve) => setTimeout(() => resolve(true), workTimeoutMs).unref());
    const timedOut = await Promise.race([allDone, timer]);
    await worker.close();
    return { results, timedOut };
  },

  async flowInfo(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    const job = await queue.getJob(String(args.id));
    if (!job) {
      return null;
    }
    const deps = await job.getDependencies();
    return {
      state: await job.getState(),
      failedReason: orNull(job.failedReason),
      returnvalue: orNull(job.returnvalue),
      childrenValues: (await job.getChildrenValues()) || {},
      ignored: (await job.getIgnoredChildrenFailures()) || {},
      dependencies: {
        processed: deps.processed || {},
        unprocessed: (deps.unprocessed || []).slice().sort(),
        ignored: deps.ignored || {},
        failed: deps.failed || [],
      },
      counts: await job.getDependenciesCount(),
      parentKey: orNull(job.parentKey),
      parent: orNull(job.parent),
    };
  },

  async getFlow(args, closables) {
    const base = baseOpts(args);
    const flow = new FlowProducer({ connection: base.connection, prefix: base.prefix });
    closables.push(flow);
    const tree = await flow.getFlow({
      id: String(args.id),
      queueName: args.queue,
      depth: args.depth || 10,
      maxChildren: args.maxChildren || 20,
    });
    return tree ? flowTreeOut(tree) : null;
  },

  async upsertJobScheduler(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    const job = await queue.upsertJobScheduler(args.id, args.repeat || {}, args.template);
    return job ? { id: job.id, delay: orNull(job.delay), opts: orNull(job.opts) } : null;
  },

  async getJobSchedulers(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    return queue.getJobSchedulers(0, -1, true);
  },

  async getJobScheduler(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    return orNull(await queue.getJobScheduler(args.id));
  },

  async removeJobScheduler(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    return { removed: await queue.removeJobScheduler(args.id) };
  },
};

/*
 * Queue-wide limits and bulk actions (tests/interop/test_interop_limits.py):
 *
 *   limits             {maxJobs?}                        -> {concurrency: getGlobalConcurrency(),
 *                      rateLimit: getGlobalRateLimit(), ttl: getRateLimitTtl(maxJobs)}
 *   setLimits          {concurrency?, max?, duration?, rateLimitMs?, removeConcurrency?,
 *                      removeRateLimit?, removeRateLimitKey?} -> as `limits` once set
 *                      (max and duration: setGlobalRateLimit; rateLimitMs: queue.rateLimit)
 *   workTimed          {count, concurrency, sleepMs, workTimeout, workerOpts?, readyFile?,
 *                      stopFile?} -> {runs: [{id, start, end}], timedOut}: each job sleeps
 *                      sleepMs (start/end: Date.now()); stops after `count` jobs completed,
 *                      or once stopFile exists
 *   retryJobs          {state?, count?, timestamp?}      -> queue.retryJobs(...) then getJobCounts()
 *   promoteJobs        {count?}                          -> queue.promoteJobs(...) then getJobCounts()
 *   removeJob          {id, removeChildren?}             -> {code: queue.remove(id, {removeChildren})}
 *   removeUnprocessedChildren {id}                       -> {dependencies: getDependencies()}
 *   failedChildrenValues {id}                           -> job.getFailedChildrenValues()
 */
async function limitsOf(queue, maxJobs) {
  return {
    concurrency: await queue.getGlobalConcurrency(),
    rateLimit: await queue.getGlobalRateLimit(),
    ttl: await queue.getRateLimitTtl(maxJobs),
  };
}

async function jobOf(args, closables) {
  const queue = new Queue(args.queue, baseOpts(args));
  closables.push(queue);
  const job = await queue.getJob(String(args.id));
  if (!job) {
    throw new Error(`job ${args.id} not found in queue ${args.queue}`);
  }
  return job;
}

const limitCommands = {
  async limits(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    return limitsOf(queue, args.maxJobs);
  },

  async setLimits(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    if (args.concurrency !== undefined) {
      await queue.setGlobalConcurrency(args.concurrency);
    }
    if (args.max !== undefined) {
      await queue.setGlobalRateLimit(args.max, args.duration);
    }
    if (args.rateLimitMs !== undefined) {
      await queue.rateLimit(args.rateLimitMs);
    }
    if (args.removeConcurrency) {
      await queue.removeGlobalConcurrency();
    }
    if (args.removeRateLimit) {
      await queue.removeGlobalRateLimit();
    }
    if (args.removeRateLimitKey) {
      await queue.removeRateLimitKey();
    }
    return limitsOf(queue);
  },

  async workTimed(args, closables) {
    const count = Number.isInteger(args.count) ? args.count : 1;
    const runs = [];
    let resolveDone;
    const allDone = new Promise((resolve) => {
      resolveDone = resolve;
    });
    const worker = new Worker(
      args.queue,
      async (job) => {
        const start = Date.now();
        await new Promise((r) => setTimeout(r, args.sleepMs || 0));
        runs.push({ id: job.id, start, end: Date.now() });
        return 'node';
      },
      Object.assign(baseOpts(args), { concurrency: args.concurrency || 1, autorun: false, drainDelay: 1 },
        args.workerOpts || {}),
    );
    closables.push(worker);
    worker.on('completed', () => {
      if (runs.length >= count) {
        resolveDone(false);
      }
    });
    if (args.stopFile) {
      setInterval(() => {
        if (fs.existsSync(args.stopFile)) {
          resolveDone(false);
        }
      }, 50).unref();
    }
    worker.on('error', (err) => {
      process.stderr.write(`worker error: ${err && err.stack ? err.stack : err}\n`);
    });
    worker.run().catch((err) => process.stderr.write(`worker.run failed: ${err && err.stack}\n`));
    await worker.waitUntilReady();
    if (args.readyFile) {
      fs.writeFileSync(args.readyFile, 'ready\n');
    }
    const timer = new Promise((resolve) => setTimeout(() => resolve(true), Math.round((args.workTimeout || 20) * 1000)).unref());
    const timedOut = await Promise.race([allDone, timer]);
    await worker.close();
    return { runs, timedOut };
  },

  async retryJobs(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    await queue.retryJobs({ state: args.state, count: args.count, timestamp: args.timestamp });
    return queue.getJobCounts();
  },

  async promoteJobs(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    await queue.promoteJobs({ count: args.count });
    return queue.getJobCounts();
  },

  async removeJob(args, closables) {
    const queue = new Queue(args.queue, baseOpts(args));
    closables.push(queue);
    const removeChildren = args.removeChildren === undefined ? true : args.removeChildren;
    return { code: await queue.remove(String(args.id), { removeChildren }) };
  },

  async removeUnprocessedChildren(args, closables) {
    const job = await jobOf(args, closables);
    await job.removeUnprocessedChildren();
    return { dependencies: await job.getDependencies() };
  },

  async failedChildrenValues(args, closables) {
    const job = await jobOf(args, closables);
    return job.getFailedChildrenValues();
  },
};

for (const group of [flowCommands, limitCommands, manualCommands(baseOpts)]) {
  for (const [name, fn] of Object.entries(group)) {
    if (Object.prototype.hasOwnProperty.call(commands, name)) {
      throw new Error(`driver command ${name} is defined twice`);
    }
    commands[name] = fn;
  }
}

async function main() {
  const [command, rawArgs] = process.argv.slice(2);
  if (!command || !Object.prototype.hasOwnProperty.call(commands, command)) {
    throw new Error(`usage: node driver.js <${Object.keys(commands).join('|')}> '<json args>'`);
  }
  let args;
  try {
    args = rawArgs ? JSON.parse(rawArgs) : {};
  } catch (err) {
    throw new Error(`args are not JSON: ${err.message}`);
  }
  const overallMs = Math.round((args.timeout || DEFAULT_TIMEOUT_S) * 1000);
  setTimeout(() => {
    fail(new Error(`driver ${command} timed out after ${overallMs} ms`), 2);
  }, overallMs).unref();

  const closables = [];
  let result;
  try {
    result = await commands[command](args, closables);
  } finally {
    await closeAll(closables);
  }
  emit({ ok: true, result: result === undefined ? null : result }, 0);
}

process.on('unhandledRejection', (err) => {
  process.stderr.write(`unhandled rejection: ${err && err.stack ? err.stack : err}\n`);
});

main().catch((err) => fail(err, 1));
