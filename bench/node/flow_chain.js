// BullMQ for Node's own 3-step chain, as bench/bench_flow_chain.py compares it with a
// 3-step workflow: `node flow_chain.js --url URL --n N` prints one line
// `RESULT {json}` with the request-response and the chain's latencies and the Redis
// time each costs (INFO cpu and commandstats around each loop).
//
// The chain is one flow: the workflow job (queue "wf") waits on step c, c on b, b on
// a (queue "steps"). Each step reads its child's value with getChildrenValues, as a
// step reading the previous result does; the run ends when the workflow job completes.
'use strict';
const { performance } = require('perf_hooks');
const { Queue, Worker, QueueEvents, FlowProducer } = require('bullmq');
const IORedis = require('ioredis');

function parseArgs(argv) {
  const a = { n: 1000, warmup: 200 };
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  a.n = Number(a.n); a.warmup = Number(a.warmup);
  return a;
}

function connOpts(url) {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null };
}

async function redisTime(r) {
  const cpu = await r.info('cpu');
  const stats = await r.info('commandstats');
  const num = (text, key) => Number((text.match(new RegExp(`${key}:([0-9.]+)`)) || [0, 0])[1]);
  const usec = (stats.match(/cmdstat_evalsha:calls=(\d+),usec=(\d+)/) || [0, 0, 0]);
  return { cpu: num(cpu, 'used_cpu_user') + num(cpu, 'used_cpu_sys'), evalsha: Number(usec[2]) };
}

async function timed(r, n, one) {
  const lat = [];
  const before = await redisTime(r);
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await one(i);
    lat.push(performance.now() - t);
  }
  const after = await redisTime(r);
  lat.sort((x, y) => x - y);
  return { p50_ms: lat[Math.floor(n / 2)], p99_ms: lat[Math.floor(n * 0.99)],
           redis_cpu_ms: (after.cpu - before.cpu) * 1000 / n,
           evalsha_us: (after.evalsha - before.evalsha) / n };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const connection = connOpts(a.url);
  const r = new IORedis(connection);
  const steps = new Worker('steps', async (job) => {
    const children = Object.values(await job.getChildrenValues());
    return { step: job.name, got: children.length ? children[0] : job.data };
  }, { connection, concurrency: 16 });
  const wf = new Worker('wf', async (job) => Object.values(await job.getChildrenValues())[0],
                        { connection, concurrency: 16 });
  const plain = new Worker('plain', async (job) => ({ ok: job.data.n }), { connection, concurrency: 16 });
  const wfEvents = new QueueEvents('wf', { connection });
  const plainEvents = new QueueEvents('plain', { connection });
  await Promise.all([steps.waitUntilReady(), wf.waitUntilReady(), plain.waitUntilReady(),
                     wfEvents.waitUntilReady(), plainEvents.waitUntilReady()]);
  const queue = new Queue('plain', { connection });
  const flows = new FlowProducer({ connection });
  const rr = async (n) => (await queue.add('job', { n })).waitUntilFinished(plainEvents, 10000);
  const chain = async (n) => {
    const tree = await flows.add({ name: 'workflow', queueName: 'wf', data: { n }, children: [
      { name: 'c', queueName: 'steps', children: [
        { name: 'b', queueName: 'steps', children: [
          { name: 'a', queueName: 'steps', data: { n } }] }] }] });
    return tree.job.waitUntilFinished(wfEvents, 10000);
  };
  for (let i = 0; i < a.warmup; i++) { await rr(i); await chain(i); }
  await r.config('RESETSTAT');
  const result = { rr: await timed(r, a.n, rr), chain: await timed(r, a.n, chain) };
  console.log('RESULT ' + JSON.stringify(result));
  await Promise.all([steps.close(), wf.close(), plain.close(), wfEvents.close(), plainEvents.close(),
                     queue.close(), flows.close()]);
  r.disconnect();
}

main().catch((e) => { console.error(e); process.exit(1); });
