// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Losing a lock: a key deleted (MISSING) or overwritten (STOLEN) in Redis, an operator's
// forceRelease (FORCED), max_hold (MAX_HOLD); a stopped daemon makes the lock
// uncertain, and a call that then gets no answer ends the session (DEADLINE).

const test = require('node:test');
const assert = require('node:assert/strict');
const { once } = require('node:events');
const { performance } = require('node:perf_hooks');
const { startEnv, waitFor } = require('./helpers/env');
const { connect } = require('..');

// Bounds for things that take a renew period or two: generous, for a loaded machine.
const LOSS_BOUND_MS = 20000;

let env;
test.before(async () => { env = await startEnv(); });
test.after(async () => { if (env) await env.stop(); });

/** Resolves with the signal's reason once it aborts; rejects after ms. */
function aborted(signal, ms) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      resolve(signal.reason);
      return;
    }
    const t = setTimeout(() => reject(new Error(`signal not aborted within ${ms} ms`)), ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve(signal.reason);
    }, { once: true });
  });
}

function within(promise, ms, what) {
  let t;
  return Promise.race([promise, new Promise((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  })]).finally(() => clearTimeout(t));
}

for (const [what, change, reason] of [
  ['a DEL of the key', (key) => env.redis.command('DEL', key), 'missing'],
  ['a SET of the key to another token', (key) => env.redis.command('SET', key, 'somebody-else'), 'stolen'],
]) {
  test(`${what} aborts the signal (${reason.toUpperCase()}), and using rejects with it`, async () => {
    const resource = `loss:${reason}`;
    const client = await connect({ servers: [env.addr], name: `loss-${reason}` });
    const clientLost = once(client, 'lost');
    let seen;
    let lockSeen;
    try {
      const err = await client.using(resource, { ttl: 1500 }, async (signal, lock) => {
        lockSeen = lock;
        assert.equal(await env.redis.command('GET', env.key(resource)), lock.token);
        await change(env.key(resource));
        seen = await aborted(signal, LOSS_BOUND_MS);
        throw signal.reason;
      }).then(() => null, (e) => e);
      assert.ok(err, 'using resolved although its lock was lost');
      assert.equal(err, seen);
      assert.equal(err.code, 'LOCK_LOST');
      assert.equal(err.lostReason, reason);
      assert.equal(err.resource, resource);
      assert.equal(lockSeen.state, 'lost');
      assert.equal(lockSeen.lostReason, reason);
      const [lock, ev] = await within(clientLost, 1000, 'client lost event');
      assert.equal(lock, lockSeen);
      assert.equal(ev.lostReason, reason);
    } finally {
      await client.close();
      await env.redis.command('DEL', env.key(resource)); // a stolen key is not the daemon's to delete
    }
  });
}

test('using rejects with the loss even when fn ignores the signal and returns', async () => {
  const client = await connect({ servers: [env.addr], name: 'loss-ignored' });
  try {
    const err = await client.using('loss:ignored', { ttl: 1500 }, async (signal) => {
      await env.redis.command('DEL', env.key('loss:ignored'));
      await aborted(signal, LOSS_BOUND_MS);
      return 'done anyway';
    }).then(() => null, (e) => e);
    assert.ok(err, 'using resolved although its lock was lost');
    assert.equal(err.lostReason, 'missing');
  } finally {
    await client.close();
  }
});

test('a forceRelease from another client aborts the signal with FORCED', async () => {
  const holder = await connect({ servers: [env.addr], name: 'loss-forced-holder' });
  const operator = await connect({ servers: [env.addr], name: 'loss-forced-operator' });
  try {
    let forced;
    let fence;
    const err = await holder.using('loss:forced', { ttl: 30000 }, async (signal, lock) => {
      fence = lock.fence;
      forced = await operator.forceRelease('loss:forced');
      await aborted(signal, LOSS_BOUND_MS);
      throw signal.reason;
    }).then(() => null, (e) => e);
    assert.ok(err);
    assert.equal(err.code, 'LOCK_LOST');
    assert.equal(err.lostReason, 'forced');
    assert.equal(forced.sessionId, holder.sessionId);
    assert.equal(forced.fence, fence);
    assert.equal(typeof forced.owner, 'bigint');
    // Nothing left to take: the daemon answers NOT_HELD.
    const again = await operator.forceRelease('loss:forced').then(() => null, (e) => e);
    assert.equal(again.code, 'NOT_HELD');
  } finally {
    await holder.close();
    await operator.close();
  }
});

test('max_hold ends a renewed lock with MAX_HOLD', async () => {
  const client = await connect({ servers: [env.addr], name: 'loss-max-hold' });
  try {
    const lock = await client.acquire('loss:max-hold', { ttl: 5000, maxHold: 1000 });
    const [err] = await within(once(lock, 'lost'), LOSS_BOUND_MS, 'MAX_HOLD');
    assert.equal(err.lostReason, 'max_hold');
    assert.equal(lock.state, 'lost');
    const rel = await lock.release().then(() => null, (e) => e);
    assert.equal(rel.code, 'NOT_HELD');
  } finally {
    await client.close();
  }
});

test('a stopped daemon: the lock turns uncertain, a call gets DEADLINE, every lock is lost', async () => {
  const client = await connect({ servers: [env.addr], name: 'loss-sigstop', sessionTimeout: 8000 });
  const closed = once(client, 'close');
  const lock = await client.acquire('loss:pause', { ttl: 1500 });
  const other = await client.acquire('loss:pause-2', { ttl: 30000 });
  assert.equal(lock.state, 'held');
  const uncertain = once(lock, 'uncertain');
  let stopped = false;
  try {
    let started;
    const running = new Promise((resolve) => { started = resolve; });
    const inUsing = client.using('loss:pause-3', { ttl: 1500 }, (signal) => {
      started();
      return aborted(signal, LOSS_BOUND_MS).then((reason) => { throw reason; });
    }).then(() => null, (e) => e);
    await running;
    process.kill(env.rlockdPid, 'SIGSTOP');
    stopped = true;
    const [err] = await within(uncertain, LOSS_BOUND_MS, 'uncertain event');
    assert.equal(err.code, 'UNCERTAIN');
    // Uncertain, not lost: the session may well live on.
    assert.equal(lock.state, 'uncertain');
    assert.ok(lock.validUntil <= performance.now());
    assert.equal(client.closed, false);

    const pingErr = await client.ping({ timeout: 1000 }).then(() => null, (e) => e);
    assert.ok(pingErr, 'ping answered by a stopped daemon');
    assert.equal(pingErr.code, 'DEADLINE');
    assert.equal(client.closed, true);
    assert.equal(client.closeReason.code, 'DEADLINE', client.closeReason.message);
    for (const l of [lock, other]) {
      assert.equal(l.state, 'lost');
      assert.equal(l.lostReason, 'session');
    }
    const [closeErr] = await within(closed, 1000, 'close event');
    assert.equal(closeErr.code, 'DEADLINE');
    const later = await client.stats().then(() => null, (e) => e);
    assert.equal(later.code, 'CLOSED');
    // using's signal aborted when its lock turned uncertain; its release then
    // met the end of the session, and it rejects with the uncertainty.
    const usingErr = await within(inUsing, 5000, 'using to settle');
    assert.equal(usingErr.code, 'UNCERTAIN');
  } finally {
    if (stopped) process.kill(env.rlockdPid, 'SIGCONT');
    await client.close();
  }
  // Resumed, the daemon sees the connection gone and releases the session's locks.
  await waitFor('the stopped session\'s keys to go', async () => (await env.lockKeys()).length === 0, LOSS_BOUND_MS);
});
