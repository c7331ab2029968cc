// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The client against a live daemon: owners and re-entry, release and extend,
// close, the operators' requests, UNAVAILABLE, addresses.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { once } = require('node:events');
const { performance } = require('node:perf_hooks');
const { startEnv, waitFor } = require('./helpers/env');
const { connect, RlockError } = require('..');

let env;
test.before(async () => { env = await startEnv(); });
test.after(async () => { if (env) await env.stop(); });

async function withClient(opts, fn) {
  const c = await connect({ servers: [env.addr], ...opts });
  try {
    return await fn(c);
  } finally {
    await c.close();
  }
}

test('every acquire is its own owner; an explicit owner re-enters', () => withClient({}, async (c) => {
  const a = await c.acquire('own:x', { ttl: 5000 });
  // Another acquire of the same client is another owner: it is excluded.
  const b = await c.acquire('own:x').then(() => null, (e) => e);
  assert.ok(b instanceof RlockError);
  assert.equal(b.code, 'NOT_ACQUIRED');
  assert.equal(await a.release(), 0);

  const first = await c.acquire('own:y', { owner: 42 });
  const again = await c.acquire('own:y', { owner: 42n });
  assert.equal(again.token, first.token);
  assert.equal(again.fence, first.fence);
  assert.equal(again.holdCount, 2);
  assert.equal(first.owner, 42n);
  const refused = await c.acquire('own:y', { owner: 42, reentry: false }).then(() => null, (e) => e);
  assert.equal(refused.code, 'ALREADY_HELD');
  const other = await c.acquire('own:y', { owner: 43 }).then(() => null, (e) => e);
  assert.equal(other.code, 'NOT_ACQUIRED');
  assert.equal(await again.release(), 1);
  assert.equal(again.state, 'released');
  assert.equal(first.state, 'held');
  const twice = await again.release().then(() => null, (e) => e);
  assert.equal(twice.code, 'NOT_HELD');
  assert.equal(await first.release(), 0);
  assert.equal(await env.redis.command('EXISTS', env.key('own:y')), 0);
  await assert.rejects(c.acquire('own:z', { owner: 1n << 63n }), RangeError);
}));

test('a waiting acquire of another owner is granted at the release, with a higher fence', () => withClient({}, async (c) => {
  const a = await c.acquire('own:wait');
  const pb = c.acquire('own:wait', { wait: 30000 });
  await waitFor('the waiter', async () => (await c.stats()).waiters === 1);
  await a.release();
  const b = await pb;
  assert.ok(b.fence > a.fence);
  assert.notEqual(b.token, a.token);
  await b.release();
}));

test('validity: a fresh lock is held until validUntil, extend moves it', () => withClient({}, async (c) => {
  const before = performance.now();
  const l = await c.acquire('valid:x', { ttl: 30000, watchdog: false });
  assert.equal(l.watchdog, false);
  assert.equal(l.state, 'held');
  // Counted from the send time, with the daemon's loss margin taken off: never a full ttl ahead.
  assert.ok(l.validUntil > performance.now() && l.validUntil < before + 30000, `validUntil ${l.validUntil - before} ms after the send`);
  const first = l.validUntil;
  const ext = await l.extend(120000);
  assert.equal(ext.ttl, 120000);
  assert.equal(l.ttl, 120000);
  assert.ok(l.validUntil > first, 'extend did not move validUntil');
  assert.equal(ext.validUntil, l.validUntil);
  await l.release();
  assert.equal(l.state, 'released');
  assert.equal(l.validUntil, 0);
}));

test('a plain lease ends: lost as EXPIRED around its validity', () => withClient({}, async (c) => {
  const l = await c.acquire('valid:lease', { ttl: 1000, watchdog: false });
  // The daemon declares the loss a margin before the end of the validity it
  // vouched for; the client's own clock may say uncertain first, or not.
  const [lost] = await once(l, 'lost');
  assert.equal(lost.lostReason, 'expired');
  assert.equal(l.state, 'lost');
}));

test('close says Goodbye: the daemon releases at once and the locks read lost', async () => {
  const c = await connect({ servers: [env.addr] });
  const l = await c.acquire('close:x', { ttl: 60000, lockDelay: 30000 });
  let lostEvents = 0;
  c.on('lost', () => lostEvents++);
  await c.close();
  assert.equal(c.closed, true);
  assert.equal(l.state, 'lost');
  assert.equal(l.lostReason, 'session');
  assert.equal(lostEvents, 0, 'a lost event for a session the application closed');
  // A clean end: no lock delay, the key goes at once.
  await waitFor('the key to go', async () => (await env.redis.command('EXISTS', env.key('close:x'))) === 0, 5000);
  const after = await c.ping().then(() => null, (e) => e);
  assert.equal(after.code, 'CLOSED');
  await c.close();
});

test('Symbol.asyncDispose releases a lock and closes a client', { skip: typeof Symbol.asyncDispose !== 'symbol' }, async () => {
  const c = await connect({ servers: [env.addr] });
  const l = await c.acquire('dispose:x');
  await l[Symbol.asyncDispose]();
  assert.equal(l.state, 'released');
  await c[Symbol.asyncDispose]();
  assert.equal(c.closed, true);
});

test('operators: sessions, locks page by page, serverInfo, killSession', () => withClient({ name: 'operator' }, async (op) => {
  const victim = await connect({ servers: [env.addr], name: 'victim' });
  const closed = once(victim, 'close');
  const locks = [];
  for (const r of ['adm:1', 'adm:2', 'adm:3', 'other:1']) locks.push(await victim.acquire(r));
  const sessions = await op.sessions({ limit: 1 });
  const v = sessions.find((s) => s.sessionId === victim.sessionId);
  assert.ok(v);
  assert.equal(v.clientName, 'victim');
  assert.equal(v.locksHeld, 4);
  assert.equal(v.state, 'active');
  const page = await op.locksPage({ prefix: 'adm:', limit: 1 });
  assert.ok(page.locks.length <= 1);
  const all = await op.locks({ prefix: 'adm:', limit: 1 });
  assert.deepEqual(all.map((l) => l.resource).sort(), ['adm:1', 'adm:2', 'adm:3']);
  const mine = await op.locks({ sessionId: victim.sessionId });
  assert.equal(mine.length, 4);
  const l1 = all.find((l) => l.resource === 'adm:1');
  assert.equal(l1.fence, locks[0].fence);
  assert.equal(l1.owner, locks[0].owner);
  assert.equal(l1.token, locks[0].token);
  const info = await op.serverInfo();
  assert.equal(info.keyPrefix, env.prefix);
  assert.equal(info.pid, env.rlockdPid);
  assert.ok(info.heldLocks >= 4);
  const killed = await op.killSession(victim.sessionId);
  assert.equal(killed.locksReleased, 4);
  const [err] = await closed;
  assert.equal(err.code, 'CLOSED');
  assert.match(err.message, /ended by an operator/);
  for (const l of locks) assert.equal(l.lostReason, 'session');
  await victim.close();
}));

test('Redis unreachable: UNAVAILABLE with retryAfter, and the lock is not held', async () => {
  const c = await connect({ servers: [env.addr] });
  process.kill(env.redisPid, 'SIGSTOP');
  try {
    const err = await c.acquire('unavail:x', { timeout: 15000 }).then(() => null, (e) => e);
    assert.ok(err);
    assert.equal(err.code, 'UNAVAILABLE');
    assert.equal(err.retryAfter, 250);
    assert.equal(c.closed, false);
  } finally {
    process.kill(env.redisPid, 'SIGCONT');
    await c.close();
  }
  await waitFor('Redis ready again', async () => {
    const s = await connect({ servers: [env.addr] });
    try {
      const st = await s.stats();
      return st.redisUp && st.redisConnectionsReady === st.redisConnections;
    } finally {
      await s.close();
    }
  }, 15000, 100);
});

test('connect tries every address; none accepting is CONNECT', async () => {
  const dead = `unix:${path.join(env.dir, 'nobody.sock')}`;
  for (let i = 0; i < 4; i++) {
    const c = await connect({ servers: [dead, env.addr, dead] });
    assert.equal(c.address, env.addr);
    await c.close();
  }
  const err = await connect({ servers: `${dead},127.0.0.1:1`, connectTimeout: 2000 }).then(() => null, (e) => e);
  assert.equal(err.code, 'CONNECT');
  assert.match(err.message, /nobody\.sock: .*no socket at that path: is rlockd running/);
  assert.match(err.message, /127\.0\.0\.1:1: .*nothing listens there: is rlockd running.*default 127\.0\.0\.1:7483/);
  await assert.rejects(connect({ servers: ['localhost'] }), TypeError);
  await assert.rejects(connect({ servers: [] }), TypeError);
});

test('a refused Hello is the daemon\'s status, not CONNECT', async () => {
  const err = await connect({ servers: [env.addr], name: 'x'.repeat(200) }).then(() => null, (e) => e);
  assert.equal(err.code, 'INVALID');
});
