// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// One resource, three kinds of worker: this client, `rlockctl run` (the C
// client) and the copied ioredis code of the articles (SET NX, the
// compare-and-delete release with the PUBLISH line of docs/migrating.md).
// They all exclude each other. And without that line, rlockd's waiters are
// granted soon after the copied code's release, not when its key's lease ends.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { startEnv, waitFor, sleep, RLOCKD_BIN } = require('./helpers/env');
const { KEYS, runShop } = require('./helpers/shop');
const { SeedLock } = require('./helpers/seed-lock');
const { connect } = require('..');

const RLOCKCTL = path.join(path.dirname(RLOCKD_BIN), 'rlockctl');
const RESOURCE = 'stock:item42';

let env;
test.before(async () => { env = await startEnv(); });
test.after(async () => { if (env) await env.stop(); });

/** `rlockctl run` of one sale; resolves to its exit code. */
function rlockctlSale() {
  return new Promise((resolve) => {
    execFile(RLOCKCTL, ['--server', env.addr, 'run', '--wait', '60s', '--ttl', '10s', RESOURCE, '--',
      process.execPath, path.join(__dirname, 'helpers', 'sell-once.js'), env.redisSock],
    { timeout: 120000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? -1) : 0, stderr });
    });
  });
}

/**
 * The copied code's seller: sales until the stock is gone, each under the copied lock.
 * firstHeld: called once its first sale holds the lock, which it keeps until
 * holdFirst() resolves (the others start meanwhile and must wait for its release).
 */
async function seedSeller(seed, report, firstHeld, holdFirst) {
  const key = env.key(RESOURCE);
  for (let n = 0; ; n++) {
    // A lease of 90 s: longer than the first hold can last (it waits up to 60 s).
    const token = await seed.acquireRetrying(key, 90, Date.now() + 60000);
    if (n === 0) {
      firstHeld();
      await holdFirst();
    }
    let sold = false;
    const inside = Number(await env.redis.command('INCR', KEYS.inside));
    try {
      if (inside !== 1) report.overlaps++;
      const stock = Number(await env.redis.command('GET', KEYS.stock));
      if (stock > 0) {
        await sleep(Math.floor(Math.random() * 3));
        await env.redis.command('SET', KEYS.stock, String(stock - 1));
        sold = true;
      }
    } finally {
      await env.redis.command('DECR', KEYS.inside);
      assert.equal(await seed.releaseLock(key, token), true, 'the copied release found its key gone');
    }
    if (!sold) return;
    report.sold++;
  }
}

test('this client, rlockctl run and the copied ioredis code exclude each other', async () => {
  const stock = 60;
  await env.redis.command('SET', KEYS.stock, String(stock));
  await env.redis.command('SET', KEYS.inside, '0');
  await env.redis.command('SET', 'shop:sold-by-rlockctl', '0');
  await env.redis.command('DEL', KEYS.lastFence);

  const client = await connect({ servers: [env.addr], name: 'interop' });
  const watcher = await connect({ servers: [env.addr], name: 'interop-watch' });
  const seed = new SeedLock(env.redisSock, { publish: true });
  const seedReport = { sold: 0, overlaps: 0 };
  const ctlCodes = [];
  let nodeReport;
  try {
    // The copied code takes the lock first and keeps it until the 4 tasks of this
    // client and the first `rlockctl run` wait in rlockd's queue: each kind of worker
    // then sells at least once, however slowly processes start. For the rest the
    // copied code's retries race the queue (which hands the lock on at once, and wins
    // most of the time: docs/migrating.md §3).
    let firstHeld;
    const held = new Promise((resolve) => { firstHeld = resolve; });
    const allQueued = () => waitFor('this client\'s 4 tasks and rlockctl waiting', async () =>
      (await watcher.stats()).waiters >= 5, 60000, 20);
    const seedRun = seedSeller(seed, seedReport, firstHeld, allQueued);
    await held;
    const ctlRuns = (async () => {
      // rlockctl sells until the stock is gone (its job sells nothing then).
      for (;;) {
        const r = await rlockctlSale();
        ctlCodes.push(r.code);
        if (r.code !== 0) throw new Error(`rlockctl run exited ${r.code}: ${r.stderr}`);
        if (Number(await env.redis.command('GET', KEYS.stock)) <= 0) return;
      }
    })();
    [nodeReport] = await Promise.all([runShop(client, env.redis, 4), seedRun, ctlRuns]);
  } finally {
    await client.close();
    await watcher.close();
    seed.close();
  }
  const byCtl = Number(await env.redis.command('GET', 'shop:sold-by-rlockctl'));
  console.log(`interop: ${stock} sales: ${nodeReport.sold} by this client (4 tasks), ` +
    `${seedReport.sold} by the copied code, ${byCtl} by rlockctl run (${ctlCodes.length} runs)`);
  assert.equal(nodeReport.overlaps, 0, 'two sellers were inside at once (seen by this client)');
  assert.equal(seedReport.overlaps, 0, 'two sellers were inside at once (seen by the copied code)');
  assert.equal(nodeReport.fenceErrors, 0, 'a fence did not grow');
  assert.equal(nodeReport.sold + seedReport.sold + byCtl, stock, 'the sales do not add up to the stock');
  assert.equal(await env.redis.command('GET', KEYS.stock), '0');
  // Each kind of worker took part.
  assert.ok(nodeReport.sold > 0 && seedReport.sold > 0 && byCtl > 0,
    `a kind of worker sold nothing: ${nodeReport.sold}, ${seedReport.sold}, ${byCtl}`);
  await waitFor('no lock key left', async () => (await env.lockKeys()).length === 0, 15000);
});

/**
 * The copied code holds the key (a lease of 20 s) for 300 ms while this client
 * waits, then releases it with or without the PUBLISH line: how long after the
 * release is the waiter granted?
 */
async function grantAfterSeedRelease(publish) {
  const key = env.key('interop:wake');
  const seed = new SeedLock(env.redisSock, { publish });
  const client = await connect({ servers: [env.addr], name: 'interop-wake' });
  try {
    const token = await seed.acquireLock(key, 20);
    assert.ok(token, 'the copied code could not take a free key');
    const waiting = client.acquire('interop:wake', { ttl: 10000, wait: 15000 });
    await sleep(300);
    assert.equal(await seed.releaseLock(key, token), true);
    const released = Date.now();
    const lock = await waiting;
    const after = Date.now() - released;
    await lock.release();
    return after;
  } finally {
    await client.close();
    seed.close();
  }
}

test('rlockd waiters are granted soon after the copied release, with or without its PUBLISH line', async () => {
  const withLine = await grantAfterSeedRelease(true);
  const without = await grantAfterSeedRelease(false);
  console.log(`interop: waiter granted ${withLine} ms after the copied release with the PUBLISH line, ` +
    `${without} ms after it without (the key's lease: 20000 ms; the daemon tries such keys again ` +
    'at most every 200 ms)');
  // Generous bounds: the lease was 20 s, the wait 15 s.
  assert.ok(withLine < 5000, `granted ${withLine} ms after the release with the line`);
  assert.ok(without < 5000, `granted ${without} ms after the release without the line`);
});
