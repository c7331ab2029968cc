// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Shared (read) locks: { shared: true } on acquire / using / acquireAll /
// usingAll. Any number of shared holders at once, or one exclusive holder;
// one FIFO queue across modes; one fence sequence for both; in one client a
// resource is one lock (shared holds of any owner join it, no upgrade:
// WRONG_KIND; a shared acquire re-enters its owner's exclusive hold).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { setTimeout: sleep } = require('node:timers/promises');
const { waitFor } = require('./helpers/env');
const { kindsSuite, track, failure, afterRestart } = require('./helpers/kinds');
const { RlockError } = require('..');

const PKG = path.join(__dirname, '..');

const suite = kindsSuite('shared');
const { withClients, keysOf } = suite;

test('two clients hold shared at once; an exclusive waiter is granted after both release, with a greater fence', () => withClients(3, async (r1, r2, w) => {
  const a = await r1.acquire('sh:both', { shared: true, ttl: 10000 });
  const b = await r2.acquire('sh:both', { shared: true, ttl: 10000 });
  for (const l of [a, b]) {
    assert.equal(l.shared, true);
    assert.equal(l.state, 'held');
    assert.equal(l.holdCount, 1);
  }
  // Each session's shared grant has its own token and fence.
  assert.notEqual(a.token, b.token);
  assert.ok(b.fence > a.fence);
  assert.equal(await suite.env.redis.command('GET', suite.env.key('sh:both')), 'group:rw');

  // The listing shows both holders, shared.
  const listed = await w.locks({ prefix: 'sh:both' });
  assert.equal(listed.length, 2);
  assert.deepEqual(listed.map((l) => l.sessionId).sort(), [r1.sessionId, r2.sessionId].sort());
  for (const l of listed) assert.equal(l.shared, true);

  // An exclusive try fails while they hold it; an exclusive wait waits.
  assert.equal((await failure(w.acquire('sh:both'))).code, 'NOT_ACQUIRED');
  const pw = track(w.acquire('sh:both', { wait: 30000, ttl: 10000 }));
  await waitFor('the exclusive waiter', async () => (await w.stats()).waiters === 1);
  assert.equal(await a.release(), 0);
  await sleep(300);
  assert.equal(pw.outcome, 'pending', 'the exclusive acquire was answered while a shared holder remained');
  assert.equal(await b.release(), 0);
  const x = await pw.done;
  assert.equal(x.shared, false);
  assert.ok(x.fence > a.fence && x.fence > b.fence, `exclusive fence ${x.fence} after shared ${a.fence}, ${b.fence}`);
  assert.equal(await suite.env.redis.command('GET', suite.env.key('sh:both')), x.token);
  const [info] = await w.locks({ prefix: 'sh:both' });
  assert.equal(info.shared, false);
  assert.equal(info.token, x.token);
  // And no shared hold while the exclusive one is in.
  assert.equal((await failure(r1.acquire('sh:both', { shared: true }))).code, 'NOT_ACQUIRED');
  assert.equal(await x.release(), 0);
  await waitFor('the keys gone', async () => (await keysOf('sh:both')).length === 0);
}));

test('FIFO across modes: a shared acquire behind a waiting exclusive one waits for it', () => withClients(3, async (r1, w, r2) => {
  const a = await r1.acquire('sh:fifo', { shared: true, ttl: 10000 });
  const pw = track(w.acquire('sh:fifo', { wait: 30000, ttl: 10000 }));
  await waitFor('the exclusive waiter', async () => (await w.stats()).waiters === 1);
  // Only shared holders are in, yet a later shared request does not pass the writer.
  const pr = track(r2.acquire('sh:fifo', { shared: true, wait: 30000, ttl: 10000 }));
  await waitFor('both waiting', async () => (await w.stats()).waiters === 2);
  assert.equal((await failure(r2.acquire('sh:fifo', { shared: true }))).code, 'NOT_ACQUIRED');
  await sleep(300);
  assert.equal(pw.outcome, 'pending');
  assert.equal(pr.outcome, 'pending', 'the shared acquire passed the waiting exclusive one');

  await a.release();
  const x = await pw.done;
  assert.equal(x.shared, false);
  assert.ok(x.fence > a.fence);
  await sleep(300);
  assert.equal(pr.outcome, 'pending', 'a shared hold was granted while the exclusive one held');
  await x.release();
  const b = await pr.done;
  assert.equal(b.shared, true);
  assert.ok(b.fence > x.fence);
  await b.release();
  await waitFor('the keys gone', async () => (await keysOf('sh:fifo')).length === 0);
}));

test('one client: shared holds of any owner join one lock; no upgrade (WRONG_KIND); shared re-enters exclusive', () => withClients(2, async (c, other) => {
  // Two acquires without owner are two owners, yet shared they join the session's one lock.
  const a = await c.acquire('sh:one', { shared: true });
  const b = await c.acquire('sh:one', { shared: true });
  assert.equal(b.token, a.token);
  assert.equal(b.fence, a.fence);
  assert.equal(b.holdCount, 2);
  assert.notEqual(a.owner, b.owner);
  assert.equal((await c.locks({ prefix: 'sh:one' })).length, 1);
  // Extended like any lock.
  const ext = await b.extend(20000);
  assert.equal(ext.ttl, 20000);
  assert.equal(a.ttl, 20000);
  // Another client shares it too.
  const o = await other.acquire('sh:one', { shared: true });
  assert.notEqual(o.token, a.token);
  assert.equal(await b.release(), 1);
  assert.equal(a.state, 'held');
  assert.equal(await a.release(), 0);
  await o.release();

  // The owner holding it shared asks for it exclusive: WRONG_KIND, nothing changes.
  const s = await c.acquire('sh:up', { shared: true, owner: 7 });
  for (const opts of [{ owner: 7 }, { owner: 7, wait: 2000 }]) {
    const err = await failure(c.acquire('sh:up', opts));
    assert.ok(err instanceof RlockError, String(err));
    assert.equal(err.code, 'WRONG_KIND');
  }
  assert.equal(s.state, 'held');
  assert.equal(s.holdCount, 1);
  assert.equal(await suite.env.redis.command('GET', suite.env.key('sh:up')), 'group:rw');
  await s.release();
  // Released, then exclusive: fine.
  const e = await c.acquire('sh:up', { owner: 7 });
  assert.equal(e.shared, false);
  assert.ok(e.fence > s.fence);

  // A shared acquire by the owner holding it exclusive re-enters: exclusive, one hold more.
  const r = await c.acquire('sh:up', { owner: 7, shared: true });
  assert.equal(r.shared, false);
  assert.equal(r.token, e.token);
  assert.equal(r.fence, e.fence);
  assert.equal(r.holdCount, 2);
  // ...but not for another owner (of this client or another one).
  assert.equal((await failure(c.acquire('sh:up', { owner: 8, shared: true }))).code, 'NOT_ACQUIRED');
  assert.equal((await failure(other.acquire('sh:up', { shared: true }))).code, 'NOT_ACQUIRED');
  assert.equal(await r.release(), 1);
  assert.equal(await e.release(), 0);
  assert.equal((await c.stats()).heldLocks, 0);
}));

test('using with shared: readers run side by side, and the lock is released at the end (also when fn throws)', () => withClients(2, async (c1, c2) => {
  let inside = 0;
  let maxInside = 0;
  const reader = (c) => c.using('sh:using', { shared: true, wait: 10000 }, async (signal, lock) => {
    assert.equal(lock.shared, true);
    assert.equal(lock.state, 'held');
    inside += 1;
    maxInside = Math.max(maxInside, inside);
    await waitFor('the other reader inside', async () => maxInside === 2, 10000, 5);
    assert.equal(await suite.env.redis.command('GET', suite.env.key('sh:using')), 'group:rw');
    signal.throwIfAborted();
    inside -= 1;
    return lock.fence;
  });
  const [f1, f2] = await Promise.all([reader(c1), reader(c2)]);
  assert.equal(maxInside, 2);
  assert.notEqual(f1, f2);
  await waitFor('the keys gone', async () => (await keysOf('sh:using')).length === 0);
  assert.equal((await c1.stats()).heldLocks, 0);

  const err = await failure(c1.using('sh:using', { shared: true }, async () => { throw new Error('boom'); }));
  assert.equal(err.message, 'boom');
  await waitFor('the keys gone after a throw', async () => (await keysOf('sh:using')).length === 0);
  // Free for a writer at once.
  const x = await c2.acquire('sh:using');
  assert.ok(x.fence > f1 && x.fence > f2);
  await x.release();
}));

test('acquireAll / usingAll with shared: two clients hold the same set at once; a writer waits for both', () => withClients(3, async (c1, c2, w) => {
  const set1 = await c1.acquireAll(['sh:all:b', 'sh:all:a'], { shared: true });
  const set2 = await c2.acquireAll(['sh:all:a', 'sh:all:b'], { shared: true });
  for (const l of [...set1, ...set2]) assert.equal(l.shared, true);
  assert.deepEqual(set1.map((l) => l.resource), ['sh:all:b', 'sh:all:a']);
  const err = await failure(w.acquireAll(['sh:all:a', 'sh:all:b']));
  assert.equal(err.code, 'NOT_ACQUIRED');
  assert.equal(err.resource, 'sh:all:a');
  const pw = track(w.acquireAll(['sh:all:a', 'sh:all:b'], { wait: 30000 }));
  await waitFor('the writer waiting', async () => (await w.stats()).waiters === 1);
  for (const l of set1) await l.release();
  await sleep(200);
  assert.equal(pw.outcome, 'pending');
  for (const l of set2) await l.release();
  const xs = await pw.done;
  for (const l of xs) {
    assert.equal(l.shared, false);
    await l.release();
  }

  let both = 0;
  await Promise.all([c1, c2].map((c) => c.usingAll(['sh:all:a', 'sh:all:b'], { shared: true, wait: 10000 }, async (signal, locks) => {
    assert.ok(locks.every((l) => l.shared));
    both += 1;
    await waitFor('both sets inside', async () => both === 2, 10000, 5);
  })));
  await waitFor('every key gone', async () => (await keysOf('sh:all:a')).length + (await keysOf('sh:all:b')).length === 0);
}));

test('the README example: readers and a writer', async () => {
  const readme = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8');
  const at = readme.indexOf('<!-- example: prices -->');
  assert.ok(at >= 0, 'no example prices in README.md');
  const code = /```js\n([\s\S]*?)```/.exec(readme.slice(at))[1];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlnode-prices.'));
  try {
    fs.mkdirSync(path.join(dir, 'node_modules'));
    fs.symlinkSync(PKG, path.join(dir, 'node_modules', 'rlockd'), 'dir');
    fs.writeFileSync(path.join(dir, 'example.js'), code);
    const file = path.join(dir, 'prices.json');
    fs.writeFileSync(file, JSON.stringify({ apple: 3, pear: 2 }));
    const { stdout } = await promisify(execFile)(process.execPath, ['example.js'], {
      cwd: dir, timeout: 60000, env: { ...process.env, RLOCKD_SERVERS: suite.env.addr, PRICES_FILE: file },
    });
    assert.match(stdout, /^apple 3 -> 4 under fence \d+\n$/);
    assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')), { apple: 4, pear: 2 });
    assert.deepEqual(await keysOf('prices'), []);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a session move takes every lock along, shared ones too, and they stay renewed and shared', () =>
  // The new daemon adopts the shared hold's place among the holders (adopt.lua), as it
  // adopts an exclusive lock's key.
  afterRestart('shared-move', 'mv:s', { shared: true }, async ({ menv, lock: s, more }) => {
    assert.equal(s.shared, true);
    // Still shared, with one place among the holders (the adopting daemon's token,
    // the old one gone): another client joins it; an exclusive try is refused.
    assert.equal(await menv.redis.command('GET', menv.key('mv:s')), 'group:rw');
    assert.equal(Number(await menv.redis.command('ZCARD', menv.key('mv:s') + ':holders')), 1);
    assert.equal(await menv.redis.command('ZSCORE', menv.key('mv:s') + ':holders', s.token), null);
    const s2 = await (await more('shared-move-2')).acquire('mv:s', { shared: true });
    await assert.rejects((await more('shared-move-3')).acquire('mv:s'), (err) => err.code === 'NOT_ACQUIRED');
    assert.equal(await s2.release(), 0);
    assert.equal(await s.release(), 0);
  }));

test('bad arguments', () => withClients(1, async (c) => {
  await assert.rejects(c.acquire('sh:bad', { shared: 'yes' }), TypeError);
  await assert.rejects(c.acquire('sh:bad', { shared: 1 }), TypeError);
  await assert.rejects(c.acquireAll(['sh:bad'], { shared: 'yes' }), TypeError);
  assert.equal((await c.stats()).heldLocks, 0);
}));
