// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Lock pairs (acquire + release of an uncontended resource) per second, and
// their p50, for three ways a Node.js program takes a lock, side by side on
// one machine and one Redis, in interleaved rounds:
//   rlockd   this client (one session), through a private rlockd
//   seed     the articles' ioredis code (test/helpers/seed-lock.js): SET key
//            token EX seconds NX, then the compare-and-delete script (EVAL)
//   redlock  node-redlock 5 (beta) on one ioredis connection: acquire, release
// Each target runs C concurrent tasks for D seconds per round, each task on a
// resource of its own. Everything goes over unix sockets.
//
//   node bench/bench.js [--seconds D] [--rounds R] [--tasks 1,50]
// (RLOCKD_BIN names the daemon, default build/bin/rlockd.) The medians over
// the rounds are printed as a table, with each target's ratio to seed.

const { parseArgs } = require('node:util');
const { performance } = require('node:perf_hooks');
const IORedis = require('ioredis');
const Redlock = require('redlock').default;
const { startEnv } = require('../test/helpers/env');
const { SeedLock } = require('../test/helpers/seed-lock');
const { connect } = require('..');

const TTL_MS = 10000;

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Runs `tasks` loops of pair(i) for ms; pairs per second and the p50 of a pair in µs. */
async function measure(tasks, ms, pair) {
  const lat = [];
  let pairs = 0;
  const end = performance.now() + ms;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: tasks }, async (_, i) => {
    while (performance.now() < end) {
      const s = performance.now();
      await pair(i);
      lat.push(performance.now() - s);
      pairs++;
    }
  }));
  const took = performance.now() - t0;
  return { rate: (pairs * 1000) / took, p50us: median(lat) * 1000 };
}

async function main() {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '3' },
      rounds: { type: 'string', default: '3' },
      tasks: { type: 'string', default: '1,50' },
    },
  });
  const ms = Number(values.seconds) * 1000;
  const rounds = Number(values.rounds);
  const taskCounts = values.tasks.split(',').map(Number);

  const env = await startEnv();
  const client = await connect({ servers: [env.addr], name: 'bench' });
  const seed = new SeedLock(env.redisSock);
  const redlock = new Redlock([new IORedis({ path: env.redisSock })], { retryCount: 0 });
  const key = (target, i) => env.key(`bench:${target}:${i}`);
  const targets = {
    rlockd: async (i) => {
      const lock = await client.acquire(`bench:rlockd:${i}`, { ttl: TTL_MS });
      await lock.release();
    },
    seed: async (i) => {
      const token = await seed.acquireLock(key('seed', i), TTL_MS / 1000);
      if (!token) throw new Error('seed: taken');
      if (!(await seed.releaseLock(key('seed', i), token))) throw new Error('seed: not released');
    },
    redlock: async (i) => {
      const lock = await redlock.acquire([key('redlock', i)], TTL_MS);
      await lock.release();
    },
  };
  const results = {}; // tasks -> target -> [{rate, p50us}]
  try {
    for (const tasks of taskCounts) {
      results[tasks] = {};
      for (const name of Object.keys(targets)) results[tasks][name] = [];
      for (const name of Object.keys(targets)) await measure(tasks, 300, targets[name]); // warm-up
      for (let r = 0; r < rounds; r++) {
        for (const name of Object.keys(targets)) {
          const m = await measure(tasks, ms, targets[name]);
          results[tasks][name].push(m);
          process.stderr.write(`round ${r + 1}/${rounds} tasks ${tasks} ${name}: ${m.rate.toFixed(0)} pairs/s, p50 ${m.p50us.toFixed(0)} us\n`);
        }
      }
    }
  } finally {
    await client.close();
    seed.close();
    redlock.quit().catch(() => {});
    await env.stop();
  }
  console.log(`node ${process.version}; ${rounds} rounds of ${ms / 1000} s; medians over the rounds`);
  console.log('| tasks | target | pairs/s | ÷ seed | p50 of a pair |');
  console.log('|---|---|---|---|---|');
  for (const tasks of taskCounts) {
    const base = median(results[tasks].seed.map((m) => m.rate));
    for (const name of Object.keys(targets)) {
      const rate = median(results[tasks][name].map((m) => m.rate));
      const p50 = median(results[tasks][name].map((m) => m.p50us));
      console.log(`| ${tasks} | ${name} | ${rate.toFixed(0)} | ${(rate / base).toFixed(2)} | ${p50.toFixed(0)} µs |`);
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
