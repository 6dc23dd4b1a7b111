// BullMQ for Node beside bench/bench_many_types.py: N queues with one Worker each
// (concurrency 10, as orijs_sync's event workers) in one process, and sequential
// request-response (queue.add, then job.waitUntilFinished on that queue's
// QueueEvents) round-robin over the queues. Queues and Workers share one IORedis
// connection (BullMQ duplicates it for each Worker's blocking connection and for each
// QueueEvents). `node many_types.js --types N --count C --warmup W --url URL`
// prints one line `RESULT {json}`.
'use strict';
const { performance } = require('perf_hooks');
const { Queue, Worker, QueueEvents } = require('bullmq');
const IORedis = require('ioredis');

function parseArgs(argv) {
  const a = { types: 1, count: 1000, warmup: 100 };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    a[k] = k === 'url' ? argv[i + 1] : Number(argv[i + 1]);
  }
  return a;
}

function connOpts(url) {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), db: Number((u.pathname || '/0').slice(1) || 0),
    maxRetriesPerRequest: null };
}

function percentile(values, q) {
  const s = [...values].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.max(0, Math.round((q / 100) * s.length) - 1))];
}

async function otherClients(url) {
  const probe = new IORedis(connOpts(url));
  await probe.client('SETNAME', 'bench-probe');
  const list = await probe.client('LIST');
  await probe.quit();
  return list.split('\n').filter((l) => l && !l.includes('name=bench-probe')).length;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const shared = new IORedis(connOpts(a.url));
  const prefix = `many-node-${process.pid}`;
  const names = Array.from({ length: a.types }, (_, i) => `${prefix}.t${i}`);
  const queues = names.map((n) => new Queue(n, { connection: shared }));
  const events = names.map((n) => new QueueEvents(n, { connection: connOpts(a.url) }));
  const workers = names.map((n) => new Worker(n, async (job) => job.data, { connection: shared, concurrency: 10 }));
  await Promise.all(events.map((e) => e.waitUntilReady()));
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  const once = async (n) => {
    const i = n % a.types;
    const job = await queues[i].add('event', { n }, { removeOnComplete: true });
    return job.waitUntilFinished(events[i], 30000);
  };
  for (let n = 0; n < Math.max(a.warmup, a.types); n += 1) await once(n);
  const samples = [];
  for (let n = 0; n < a.count; n += 1) {
    const t0 = performance.now();
    await once(n);
    samples.push(performance.now() - t0);
  }
  const connections = await otherClients(a.url);
  const rss = process.memoryUsage().rss / 1048576;
  await Promise.all(workers.map((w) => w.close()));
  await Promise.all(events.map((e) => e.close()));
  await Promise.all(queues.map((q) => q.obliterate({ force: true }).then(() => q.close())));
  await shared.quit();
  console.log('RESULT ' + JSON.stringify({ peer: 'bullmq-node', types: a.types, threads: '-', connections,
    rss_mb: +rss.toFixed(1), p50_ms: +percentile(samples, 50).toFixed(3), p99_ms: +percentile(samples, 99).toFixed(3) }));
}

main().then(() => process.exit(0), (err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
