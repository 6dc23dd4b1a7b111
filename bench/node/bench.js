// BullMQ for Node, the reference peer of bench/run.py. Same cases and output as
// bench/peers/common.py: `node bench.js --case CASE --url URL --n N
// [--concurrency C] [--procs P]` prints one line `RESULT {json}`.
'use strict';
const { spawn } = require('child_process');
const { performance } = require('perf_hooks');
const { Queue, Worker, QueueEvents } = require('bullmq');
const IORedis = require('ioredis');
const fs = require('fs');
const path = require('path');

const QUEUE = 'bench';
const CHUNK = 500;
const WARMUP = 20;
const READY_KEY = 'bench:ready';
const STOP_KEY = 'bench:stop';
const PROGRESS_KEY = 'bench:progress';
const CONTROL_NAME = 'bench-ctl'; // the harness's own connections, not counted by waitReady
const BULL_JOB_SUFFIXES = ['', ':logs', ':lock', ':dependencies', ':processed', ':failed', ':unsuccessful'];
const SANDBOXED = path.join(__dirname, 'sandboxed.js'); // the proc case's processor file

function parseArgs(argv) {
  const a = { n: 1000, concurrency: 16, procs: 4, child: 0, timeout: 300, payload: 0, sample: 0 };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    const v = argv[i + 1];
    a[k] = ['case', 'url', 'handler'].includes(k) ? v : Number(v);
  }
  return a;
}

const now = () => performance.now() / 1000; // seconds, monotonic
const wall = () => (performance.timeOrigin + performance.now()) / 1000; // epoch seconds

function connOpts(url) {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), db: Number((u.pathname || '/0').slice(1) || 0),
    maxRetriesPerRequest: null };
}

function control(url) {
  return new IORedis(Object.assign(connOpts(url), { connectionName: CONTROL_NAME }));
}

// Connections blocked in a Redis command (BZPOPMIN, ...) that are not the harness's:
// a worker blocked there is connected and waiting for work (common.py's blocked_clients).
async function blockedClients(r) {
  const list = await r.client('LIST');
  return list.split('\n').filter((line) => {
    const f = Object.fromEntries(line.split(' ').map((kv) => kv.split('=')));
    return f.flags && f.flags.includes('b') && f.name !== CONTROL_NAME;
  }).length;
}

// Wait until `expected` worker connections are blocked waiting for work, then 0.2 s more.
async function waitReady(url, expected, timeoutS = 60) {
  const r = control(url);
  try {
    const deadline = now() + timeoutS;
    let n;
    while ((n = await blockedClients(r)) < expected) {
      if (now() > deadline) throw new Error(`workers not ready: ${n}/${expected} blocked`);
      await new Promise((res) => setTimeout(res, 10));
    }
    await new Promise((res) => setTimeout(res, 200));
  } finally {
    r.disconnect();
  }
}

async function resume(a) {
  const q = new Queue(QUEUE, { connection: connOpts(a.url) });
  await q.resume();
  await q.close();
}

function rate(n, seconds, extra = {}) {
  return Object.assign({ n, seconds: +seconds.toFixed(4), ops_per_s: seconds > 0 ? +(n / seconds).toFixed(1) : null }, extra);
}

function percentile(values, q) {
  const s = [...values].sort((x, y) => x - y);
  const k = (s.length - 1) * q;
  const lo = Math.floor(k);
  const hi = Math.min(lo + 1, s.length - 1);
  return s[lo] + (s[hi] - s[lo]) * (k - lo);
}

function chunks(arr, size = CHUNK) {
  const out = [];
  for (let i = 0; i < arr.length; i += size) out.push(arr.slice(i, i + size));
  return out;
}

const processor = async () => null;

async function warm(a) {
  const q = new Queue('warm', { connection: connOpts(a.url) });
  for (let i = 0; i < WARMUP; i++) await q.add('job', { i }, { removeOnComplete: true });
  await q.addBulk(Array.from({ length: WARMUP }, (_, i) => ({ name: 'job', data: { i }, opts: { removeOnComplete: true } })));
  await q.obliterate({ force: true });
  await q.close();
}

// Untimed: n no-op jobs on a paused queue (the workers get ready before the resume).
async function fill(a, n, remove = true, name = 'job') {
  const q = new Queue(QUEUE, { connection: connOpts(a.url) });
  await q.pause();
  const pad = a.payload ? 'x'.repeat(a.payload) : null;
  const data = (i) => (pad ? { i, pad } : { i });
  const jobs = Array.from({ length: n }, (_, i) => ({ name, data: data(i), opts: { removeOnComplete: remove } }));
  for (const c of chunks(jobs)) await q.addBulk(c);
  await q.close();
}

async function seqAdd(a) {
  await warm(a);
  const q = new Queue(QUEUE, { connection: connOpts(a.url) });
  const t0 = now();
  for (let i = 0; i < a.n; i++) await q.add('job', { i }, { removeOnComplete: true });
  const dt = now() - t0;
  await q.close();
  return rate(a.n, dt);
}

async function bulkAdd(a) {
  await warm(a);
  const q = new Queue(QUEUE, { connection: connOpts(a.url) });
  const jobs = Array.from({ length: a.n }, (_, i) => ({ name: 'job', data: { i }, opts: { removeOnComplete: true } }));
  const t0 = now();
  for (const c of chunks(jobs)) await q.addBulk(c);
  const dt = now() - t0;
  await q.close();
  return rate(a.n, dt);
}

async function runWorkerUntil(a, n, concurrency) {
  let count = 0;
  let last = 0;
  let resolve;
  const done = new Promise((r) => { resolve = r; });
  const worker = new Worker(QUEUE, processor, { connection: connOpts(a.url), concurrency });
  worker.on('completed', () => {
    count += 1;
    last = now();
    if (count >= n) resolve();
  });
  await waitReady(a.url, 1);
  const sampler = a.sample ? startSampler() : null;
  const t0 = now();
  await resume(a);
  const timer = setTimeout(() => resolve('timeout'), a.timeout * 1000);
  const r = await done;
  clearTimeout(timer);
  const usage = sampler ? sampler.stop(n) : {};
  await worker.close();
  if (r === 'timeout') throw new Error(`timed out at ${count}/${n}`);
  return rate(count, last - t0, Object.assign({ concurrency }, usage));
}

function procStatus() {
  const text = fs.readFileSync('/proc/self/status', 'utf8');
  const field = (name) => Number((text.match(new RegExp(`^${name}:\\s+(\\d+)`, 'm')) || [0, 0])[1]);
  return { rssKb: field('VmRSS'), threads: field('Threads') };
}

// Peak RSS and thread count every 250 ms, and CPU time, over the timed window
// (common.py's ProcSampler); only with --sample 1 (bench/scaling.py): sampling
// every 50 ms cost Node's event loop measurably.
function startSampler() {
  const peak = { rssKb: 0, threads: 0 };
  const sample = () => {
    const st = procStatus();
    peak.rssKb = Math.max(peak.rssKb, st.rssKb);
    peak.threads = Math.max(peak.threads, st.threads);
  };
  sample();
  const cpu0 = process.cpuUsage();
  const timer = setInterval(sample, 250);
  return {
    stop(n) {
      const cpu = process.cpuUsage(cpu0);
      clearInterval(timer);
      sample();
      const cpuS = (cpu.user + cpu.system) / 1e6;
      return { rss_mb: +(peak.rssKb / 1024).toFixed(1), threads: peak.threads, cpu_s: +cpuS.toFixed(3),
        cpu_us_per_job: +((cpuS / Math.max(n, 1)) * 1e6).toFixed(1) };
    },
  };
}

async function processCase(a) {
  await fill(a, a.n);
  return runWorkerUntil(a, a.n, a.concurrency);
}

// `process` on a paused queue someone else filled (bench/scaling.py's backlog case).
async function processOnly(a) {
  return runWorkerUntil(a, a.n, a.concurrency);
}

async function blpopLoop(r, key, timeoutS) {
  const deadline = now() + timeoutS;
  while (now() < deadline) {
    const v = await r.blpop(key, 1);
    if (v) return v;
  }
  return null;
}

async function multi(a) {
  const r = control(a.url);
  await fill(a, a.n);
  const procs = [];
  try {
    for (let i = 0; i < a.procs; i++) {
      procs.push(spawn(process.execPath, [__filename, '--case', 'child', '--url', a.url, '--n', String(a.n),
        '--concurrency', String(a.concurrency), '--child', String(i), '--timeout', String(a.timeout)],
      { stdio: ['ignore', 'ignore', 'inherit'] }));
    }
    const exited = procs.map(() => false);
    procs.forEach((p, i) => p.on('exit', () => { exited[i] = true; }));
    for (let i = 0; i < a.procs; i++) {
      if (!(await r.blpop(READY_KEY, 60))) throw new Error('worker processes did not get ready in 60 s');
    }
    await waitReady(a.url, a.procs);
    const t0 = wall();
    await resume(a);
    const deadline = now() + a.timeout;
    for (;;) {
      const vals = Object.values(await r.hgetall(PROGRESS_KEY)).map((v) => JSON.parse(v));
      const total = vals.reduce((s, v) => s + v.count, 0);
      if (total >= a.n) break;
      if (exited.some((x) => x)) throw new Error('a worker process exited early');
      if (now() > deadline) throw new Error(`timed out with ${total}/${a.n} done`);
      await new Promise((res) => setTimeout(res, 50));
    }
    await r.rpush(STOP_KEY, ...Array(a.procs).fill('stop'));
    await Promise.all(procs.map((p, i) => (exited[i] ? null : new Promise((res) => p.on('exit', res)))));
    const vals = Object.values(await r.hgetall(PROGRESS_KEY)).map((v) => JSON.parse(v));
    const last = Math.max(...vals.map((v) => v.last));
    const counts = vals.map((v) => v.count);
    return rate(counts.reduce((s, c) => s + c, 0), last - t0, { procs: a.procs, concurrency: a.concurrency, per_proc: counts });
  } finally {
    for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
    r.disconnect();
  }
}

async function child(a) {
  const r = control(a.url);
  let count = 0;
  let last = 0;
  const publish = () => r.hset(PROGRESS_KEY, String(a.child), JSON.stringify({ count, last }));
  const worker = new Worker(QUEUE, processor, { connection: connOpts(a.url), concurrency: a.concurrency });
  worker.on('completed', () => { count += 1; last = wall(); });
  await worker.waitUntilReady();
  await r.rpush(READY_KEY, String(a.child));
  const timer = setInterval(publish, 100);
  const stopper = control(a.url);
  await blpopLoop(stopper, STOP_KEY, a.timeout);
  stopper.disconnect();
  clearInterval(timer);
  await worker.close();
  await publish();
  r.disconnect();
  return { count };
}

async function rr(a) {
  await warm(a);
  const q = new Queue(QUEUE, { connection: connOpts(a.url) });
  const events = new QueueEvents(QUEUE, { connection: connOpts(a.url) });
  const worker = new Worker(QUEUE, processor, { connection: connOpts(a.url), concurrency: 16 });
  await events.waitUntilReady();
  await worker.waitUntilReady();
  await waitReady(a.url, 2); // the worker and the events reader
  const lat = [];
  try {
    const t0 = now();
    for (let i = 0; i < a.n; i++) {
      const s = now();
      const job = await q.add('job', { i }, { removeOnComplete: false });
      await job.waitUntilFinished(events, 10000);
      lat.push(now() - s);
    }
    const total = now() - t0;
    const ms = lat.map((x) => x * 1000);
    return rate(lat.length, total, { p50_ms: +percentile(ms, 0.5).toFixed(3), p99_ms: +percentile(ms, 0.99).toFixed(3),
      max_ms: +Math.max(...ms).toFixed(3) });
  } finally {
    await worker.close();
    await events.close();
    await q.close();
  }
}

async function memory(a) {
  await fill(a, a.n, false);
  await runWorkerUntil(a, a.n, 16);
  const r = control(a.url);
  try {
    const memoryOf = async (keys) => {
      const p = r.pipeline();
      for (const k of keys) p.call('MEMORY', 'USAGE', k, 'SAMPLES', '0');
      const res = await p.exec();
      return res.reduce((s, [, v]) => s + Number(v || 0), 0);
    };
    const ids = await r.zrange(`bull:${QUEUE}:completed`, 0, 199);
    let sum = 0;
    for (const id of ids) sum += await memoryOf(BULL_JOB_SUFFIXES.map((s) => `bull:${QUEUE}:${id}${s}`));
    const jobAvg = ids.length ? sum / ids.length : 0;
    const index = (await memoryOf([`bull:${QUEUE}:completed`])) / Math.max(a.n, 1);
    return { n: a.n, sampled: ids.length, job_bytes: +jobAvg.toFixed(1), index_bytes: +index.toFixed(1),
      bytes_per_job: +(jobAvg + index).toFixed(1) };
  } finally {
    r.disconnect();
  }
}

// -- handlers in child processes (the proc case: bench/peers/common.py) --------------

// The live processes whose parent is `pid` (a scan of /proc, as bench/peers/childmem.py).
function childrenOf(pid) {
  const out = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(name));
    } catch (err) { /* gone meanwhile */ }
  }
  return out;
}

function memoryKb(pid) {
  try {
    const field = (text, name) => Number((text.match(new RegExp(`^${name}:\\s+(\\d+)`, 'm')) || [0, 0])[1]);
    const rss = field(fs.readFileSync(`/proc/${pid}/status`, 'utf8'), 'VmRSS');
    const pss = field(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'), 'Pss');
    return rss ? [rss, pss] : null;
  } catch (err) {
    return null;
  }
}

// Each child's peak VmRSS and Pss, sampled every 250 ms; stop() -> the result's fields.
function startChildMemory() {
  const peak = new Map();
  const sample = () => {
    for (const pid of childrenOf(process.pid)) {
      const m = memoryKb(pid);
      if (!m) continue;
      const old = peak.get(pid) || [0, 0];
      peak.set(pid, [Math.max(old[0], m[0]), Math.max(old[1], m[1])]);
    }
  };
  sample();
  const timer = setInterval(sample, 250);
  return {
    stop() {
      sample();
      clearInterval(timer);
      const all = [...peak.values()];
      if (!all.length) return { children_seen: 0 };
      const mean = (i) => +(all.reduce((s, p) => s + p[i], 0) / all.length / 1024).toFixed(1);
      return { children_seen: all.length, child_rss_mb: mean(0), child_pss_mb: mean(1),
        child_rss_each_mb: all.slice(0, 8).map((p) => +(p[0] / 1024).toFixed(1)) };
    },
  };
}

// Completions of `worker`; until(n) resolves at the n-th (rejects after timeoutS).
function countCompletions(worker) {
  const c = { count: 0, last: 0, waiters: [] };
  worker.on('completed', () => {
    c.count += 1;
    c.last = now();
    c.waiters = c.waiters.filter(([n, done]) => (c.count >= n ? (done(), false) : true));
  });
  c.until = (n, timeoutS) => new Promise((resolve, reject) => {
    if (c.count >= n) return resolve();
    const timer = setTimeout(() => reject(new Error(`timed out at ${c.count}/${n}`)), timeoutS * 1000);
    c.waiters.push([n, () => { clearTimeout(timer); resolve(); }]);
  });
  return c;
}

function cpuJobMs() {
  const { burn, ITERATIONS } = require(SANDBOXED);
  let best = Infinity;
  for (let i = 0; i < 3; i++) {
    const t0 = now();
    burn(ITERATIONS);
    best = Math.min(best, now() - t0);
  }
  return +(best * 1000).toFixed(2);
}

// A Worker given the processor's file (its sandbox: one child process per job running at
// once); 2 x procs warm-up jobs first (its children started), then timed as `process`.
async function proc(a) {
  const jobMs = a.handler === 'cpu' ? cpuJobMs() : null;
  const worker = new Worker(QUEUE, SANDBOXED, { connection: connOpts(a.url), concurrency: a.concurrency,
    useWorkerThreads: false });
  const done = countCompletions(worker);
  try {
    const warm = 2 * Math.max(a.procs, a.concurrency);
    const q = new Queue(QUEUE, { connection: connOpts(a.url) });
    await q.addBulk(Array.from({ length: warm }, (_, i) => ({ name: a.handler, data: { i }, opts: { removeOnComplete: true } })));
    await q.close();
    await done.until(warm, 120);
    await fill(a, a.n, true, a.handler);
    await waitReady(a.url, 1);
    const memory = startChildMemory();
    const t0 = now();
    await resume(a);
    await done.until(warm + a.n, a.timeout);
    return rate(done.count - warm, done.last - t0, Object.assign({ handler: a.handler, processes: a.concurrency,
      concurrency: a.concurrency, job_ms: jobMs }, memory.stop()));
  } finally {
    await worker.close();
  }
}

const CASES = { seq_add: seqAdd, bulk_add: bulkAdd, process: processCase, process_only: processOnly, multi, child, rr, memory, proc };

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const fn = CASES[a.case];
  if (!fn) throw new Error(`unknown case ${a.case}`);
  const result = await fn(a);
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

main().then(() => process.exit(0), (err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
