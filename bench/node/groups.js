// GroupMQ for Node (npm groupmq 1.1.0, pinned in package.json), the peer of
// bench/run.py's group queue case: `node groups.js --case groups --url URL --n N
// [--concurrency C] [--groups G]` fills N no-op jobs over G groups on a paused queue
// (untimed), starts one Worker of concurrency C, waits 1 s, resumes, and times from
// its first completion to its last, as bench/peers/orijs_groups.py does.
// Prints one line `RESULT {json}`, like bench.js.
'use strict';
const { performance } = require('perf_hooks');
const IORedis = require('ioredis');
const { Queue, Worker } = require('groupmq');

function parseArgs(argv) {
  const a = { n: 1000, concurrency: 16, groups: 100, timeout: 300 };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    a[k] = ['case', 'url'].includes(k) ? argv[i + 1] : Number(argv[i + 1]);
  }
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const redis = new IORedis(a.url, { maxRetriesPerRequest: null });
  const queue = new Queue({ redis, namespace: 'bench-groups' });
  await queue.pause();
  for (let start = 0; start < a.n; start += 500) {
    const adds = [];
    for (let i = start; i < Math.min(start + 500, a.n); i++) {
      adds.push(queue.add({ groupId: `g${i % a.groups}`, data: { i } }));
    }
    await Promise.all(adds);
  }
  let count = 0;
  let first = 0;
  let last = 0;
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });
  const worker = new Worker({ queue, concurrency: a.concurrency, handler: async () => null });
  worker.on('completed', () => {
    count += 1;
    last = performance.now();
    if (count === 1) first = last;
    if (count >= a.n) finish();
  });
  await new Promise((res) => setTimeout(res, 1000));
  await queue.resume();
  const timer = setTimeout(() => finish(), a.timeout * 1000);
  await done;
  clearTimeout(timer);
  const seconds = (last - first) / 1000;
  await worker.close(1000);
  const result = count >= a.n
    ? { n: a.n, seconds: +seconds.toFixed(4), ops_per_s: +((a.n - 1) / seconds).toFixed(1),
        groups: a.groups, concurrency: a.concurrency }
    : { error: `timed out at ${count}/${a.n}` };
  process.stdout.write('RESULT ' + JSON.stringify(result) + '\n', () => process.exit(0));
}

main().catch((err) => {
  process.stdout.write('RESULT ' + JSON.stringify({ error: String(err && err.stack || err) }) + '\n',
    () => process.exit(1));
});
