// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Mutual exclusion, end to end: concurrent tasks of one process, and of
// several processes, decrement one stock counter under using('stock:item42').

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { startEnv, waitFor } = require('./helpers/env');
const { KEYS, runShop } = require('./helpers/shop');
const { connect } = require('..');

const run = promisify(execFile);

let env;
test.before(async () => { env = await startEnv(); });
test.after(async () => { if (env) await env.stop(); });

async function resetShop(stock) {
  await env.redis.command('SET', KEYS.stock, String(stock));
  await env.redis.command('SET', KEYS.inside, '0');
  await env.redis.command('DEL', KEYS.lastFence);
}

async function assertNoLockLeft() {
  await waitFor('no lock key left and the daemon idle', async () => {
    if ((await env.lockKeys()).length !== 0) return false;
    const c = await connect({ servers: [env.addr] });
    try {
      const st = await c.stats();
      return st.heldLocks === 0 && st.waiters === 0;
    } finally {
      await c.close();
    }
  }, 15000);
}

test('8 concurrent tasks of one client sell the stock exactly, one at a time', async () => {
  const stock = 40;
  await resetShop(stock);
  const client = await connect({ servers: [env.addr], name: 'shop-in-process' });
  let report;
  try {
    report = await runShop(client, env.redis, 8);
  } finally {
    await client.close();
  }
  assert.equal(report.overlaps, 0, 'two tasks were inside at once');
  assert.equal(report.maxInside, 1);
  assert.equal(report.fenceErrors, 0, 'a fence did not grow');
  assert.equal(report.sold, stock);
  assert.equal(await env.redis.command('GET', KEYS.stock), '0');
  // Every task took part: the daemon's queue let each in, not one owner only.
  assert.equal(report.perTask.length, 8);
  for (const n of report.perTask) assert.ok(n > 0, `a task sold nothing: ${report.perTask}`);
  await assertNoLockLeft();
});

test('3 processes x 8 tasks sell the stock exactly, one at a time', async () => {
  const stock = 60;
  await resetShop(stock);
  const worker = path.join(__dirname, 'helpers', 'shop-worker.js');
  const outs = await Promise.all([0, 1, 2].map(() => run(process.execPath,
    [worker, env.addr, env.redisSock, '8'], { timeout: 120000 })));
  const reports = outs.map((o) => JSON.parse(o.stdout.trim()));
  const sold = reports.reduce((n, r) => n + r.sold, 0);
  for (const r of reports) {
    assert.equal(r.overlaps, 0, 'two tasks were inside at once');
    assert.equal(r.maxInside, 1);
    assert.equal(r.fenceErrors, 0, 'a fence did not grow');
  }
  assert.equal(sold, stock);
  assert.equal(await env.redis.command('GET', KEYS.stock), '0');
  await assertNoLockLeft();
});
