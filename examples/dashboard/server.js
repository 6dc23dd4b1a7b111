#!/usr/bin/env node
/*
 * bull-board (the usual BullMQ dashboard) over orijs_sync's queues: they use
 * BullMQ's Redis layout, so the board reads them as it reads Node's.
 *
 *   npm install            (once, in this folder)
 *   REDIS_URL=redis://127.0.0.1:6379/0 node server.js
 *
 * Environment:
 *   REDIS_URL  the Redis to show (default redis://127.0.0.1:6379/0)
 *   PREFIX     key prefix of the queues (default "bull")
 *   QUEUES     comma-separated queue names; default: every queue found under
 *              the prefix (scanned at start and every 10 s)
 *   HOST, PORT where the board listens (default 127.0.0.1:3000)
 * The board is at http://HOST:PORT/, its JSON API under /api (e.g. /api/queues).
 */
'use strict';

const express = require('express');
const IORedis = require('ioredis');
const { Queue } = require('bullmq');
const { createBullBoard } = require('@bull-board/api');
const { BullMQAdapter } = require('@bull-board/api/bullMQAdapter');
const { ExpressAdapter } = require('@bull-board/express');

const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379/0';
const prefix = process.env.PREFIX || 'bull';
const host = process.env.HOST || '127.0.0.1';
const port = Number(process.env.PORT || 3000);
const connection = new IORedis(url, { maxRetriesPerRequest: null });
const queues = new Map();     // name -> bullmq Queue
// Keys every queue with jobs (or a past) has: how a queue is found by scanning.
const QUEUE_KEYS = new Set(['meta', 'id', 'wait', 'active', 'completed', 'failed', 'delayed',
  'prioritized', 'paused', 'events']);

async function queueNames() {
  if (process.env.QUEUES) {
    return process.env.QUEUES.split(',').map((name) => name.trim()).filter(Boolean);
  }
  const found = new Set();
  let cursor = '0';
  do {
    const [next, keys] = await connection.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const rest = key.slice(prefix.length + 1);
      const cut = rest.lastIndexOf(':');
      if (cut > 0 && QUEUE_KEYS.has(rest.slice(cut + 1))) found.add(rest.slice(0, cut));
    }
  } while (cursor !== '0');
  return [...found].filter((name) => !name.includes(':')).sort();
}

async function refresh(board) {
  const names = await queueNames();
  const added = names.filter((name) => !queues.has(name));
  for (const name of added) queues.set(name, new Queue(name, { connection, prefix }));
  if (added.length) {
    board.replaceQueues([...queues.values()].map((queue) => new BullMQAdapter(queue)));
    console.log(`bull-board: showing ${[...queues.keys()].join(', ')}`);
  }
}

async function main() {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath('/');
  const board = createBullBoard({ queues: [], serverAdapter });
  await refresh(board);
  if (!process.env.QUEUES) {
    setInterval(() => refresh(board).catch((err) => console.error(err)), 10000).unref();
  }
  const app = express();
  app.use('/', serverAdapter.getRouter());
  const server = app.listen(port, host, () => console.log(`bull-board at http://${host}:${port}/`));
  const stop = () => server.close(() => connection.quit().finally(() => process.exit(0)));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
