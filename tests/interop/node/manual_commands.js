/*
 * Manual processing commands of driver.js (tests/interop/test_interop_manual.py): BullMQ's
 * "manually processing jobs", a Worker made without a processor.
 *
 *   manualProcess  {count, token?, fetchNext?, fail?, workTimeout?, workerOpts?}
 *                  -> [{id, name, data, token, lock, attemptsStarted, next}]: takes jobs with
 *                  worker.getNextJob(token) until `count` were moved: moveToCompleted({echo:
 *                  data}, token, fetchNext), or moveToFailed(new Error(fail), token,
 *                  fetchNext) when `fail` is given; `lock` is the job's lock key value
 *                  while it was held, `next` the id of the job a fetchNext returned
 *   moveWithToken  {id, token, fail?}  -> {moved}: Job.fromId, then moveToCompleted({by:
 *                  "node"}, token, false) (moveToFailed(new Error(fail), ...) when `fail`):
 *                  completes a job another process took with that token
 *   extendLock     {id, token, duration} -> {extended, pttl}: job.extendLock (ms)
 *   manualTake     {token?, workerOpts?} -> {id, lock, pttl} (or null): takes one job with
 *                  getNextJob and leaves it active (its lock runs out: a crashed process)
 */
'use strict';

const { Job, Queue, Worker } = require('bullmq');

function manualCommands(baseOpts) {
  return {
    async manualProcess(args, closables) {
      const count = Number.isInteger(args.count) ? args.count : 1;
      const token = args.token || 'node-manual-token';
      const worker = new Worker(args.queue, null, Object.assign(baseOpts(args), {
        autorun: false,
        drainDelay: 1,
      }, args.workerOpts || {}));
      closables.push(worker);
      const client = await worker.client;
      const deadline = Date.now() + Math.round((args.workTimeout || 15) * 1000);
      const done = [];
      let job = null;
      while (done.length < count && Date.now() < deadline) {
        if (!job) {
          job = await worker.getNextJob(token);
        }
        if (!job) {
          continue;
        }
        const entry = {
          id: job.id,
          name: job.name,
          data: job.data,
          token: job.token,
          lock: await client.get(`${worker.keys['']}${job.id}:lock`),
          attemptsStarted: job.attemptsStarted,
          next: null,
        };
        const next = args.fail
          ? await job.moveToFailed(new Error(args.fail), token, Boolean(args.fetchNext))
          : await job.moveToCompleted({ echo: job.data }, token, Boolean(args.fetchNext));
        done.push(entry);
        job = null;
        if (Array.isArray(next) && next[0]) {
          job = Job.fromJSON(worker, next[0], next[1]);
          job.token = token;
          entry.next = job.id;
        }
      }
      return done;
    },

    async moveWithToken(args, closables) {
      const queue = new Queue(args.queue, baseOpts(args));
      closables.push(queue);
      const job = await Job.fromId(queue, String(args.id));
      if (!job) {
        throw new Error(`job ${args.id} not found`);
      }
      if (args.fail) {
        await job.moveToFailed(new Error(args.fail), args.token, false);
      } else {
        await job.moveToCompleted({ by: 'node' }, args.token, false);
      }
      return { moved: true };
    },

    async manualTake(args, closables) {
      const token = args.token || 'node-manual-token';
      const worker = new Worker(args.queue, null, Object.assign(baseOpts(args), {
        autorun: false,
        drainDelay: 1,
      }, args.workerOpts || {}));
      closables.push(worker);
      const job = await worker.getNextJob(token);
      if (!job) {
        return null;
      }
      const client = await worker.client;
      const lockKey = `${worker.keys['']}${job.id}:lock`;
      return { id: job.id, lock: await client.get(lockKey), pttl: await client.pttl(lockKey) };
    },

    async extendLock(args, closables) {
      const queue = new Queue(args.queue, baseOpts(args));
      closables.push(queue);
      const job = await Job.fromId(queue, String(args.id));
      if (!job) {
        throw new Error(`job ${args.id} not found`);
      }
      const extended = await job.extendLock(args.token, args.duration);
      const client = await queue.client;
      return { extended, pttl: await client.pttl(`${queue.keys['']}${job.id}:lock`) };
    },
  };
}

module.exports = { manualCommands };
