// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// acquireAll and usingAll: several locks, all or none, in one order (the names'
// bytes, as the C client's rlock_acquire_all) so that tasks naming them in other
// orders never deadlock; what was taken is given back on a failure; a loss of any
// lock aborts usingAll's signal.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { startEnv, waitFor } = require('./helpers/env');
const { connect, RlockError } = require('..');

let env;
test.before(async () => { env = await startEnv(); });
test.after(async () => { if (env) await env.stop(); });

test('tasks naming {A, B} and {B, A}: no deadlock, one inside at a time, counters exact', async () => {
  const clients = await Promise.all([0, 1, 2, 3].map(() => connect({ servers: [env.addr] })));
  const counters = { a: 0, b: 0 };
  let inside = 0;
  let maxInside = 0;
  try {
    await Promise.all(clients.map(async (c, n) => {
      for (let i = 0; i < 40; i++) {
        const names = (n + i) % 2 ? ['all:A', 'all:B'] : ['all:B', 'all:A'];
        await c.usingAll(names, { wait: 30000 }, async (signal, locks) => {
          assert.deepEqual(locks.map((l) => l.resource), names);
          inside += 1;
          maxInside = Math.max(maxInside, inside);
          const a = counters.a;
          const b = counters.b;
          await sleep(1);
          counters.a = a + 1;
          counters.b = b + 1;
          inside -= 1;
        });
      }
    }));
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
  assert.equal(maxInside, 1);
  assert.deepEqual(counters, { a: 160, b: 160 });
});

test('all or nothing: a busy lock fails the set, and the ones taken before it are free again', async () => {
  const holder = await connect({ servers: [env.addr] });
  const client = await connect({ servers: [env.addr] });
  try {
    const b = await holder.acquire('aon:B');
    for (const opts of [{}, { wait: 300 }]) {
      const err = await client.acquireAll(['aon:C', 'aon:A', 'aon:B'], opts).then(() => null, (e) => e);
      assert.ok(err instanceof RlockError, String(err));
      assert.equal(err.code, opts.wait ? 'TIMEOUT' : 'NOT_ACQUIRED');
      assert.equal(err.resource, 'aon:B');
      // A was taken first and given back; C (after B) was never taken.
      assert.equal(await env.redis.command('EXISTS', env.key('aon:A')), 0);
      assert.equal(await env.redis.command('EXISTS', env.key('aon:C')), 0);
      assert.equal((await client.stats()).heldLocks, 1);
    }
    await b.release();
    const locks = await client.acquireAll(['aon:C', 'aon:A', 'aon:B']);
    assert.deepEqual(locks.map((l) => l.resource), ['aon:C', 'aon:A', 'aon:B']);
    // Taken A, B, C: fences in that order.
    assert.ok(locks[1].fence < locks[2].fence && locks[2].fence < locks[0].fence);
    for (const l of locks) await l.release();
    assert.equal((await client.stats()).heldLocks, 0);
  } finally {
    await holder.close();
    await client.close();
  }
});

test('a kind per entry: { name, shared, limit, permits } takes that one in its own kind', async () => {
  const client = await connect({ servers: [env.addr] });
  const other = await connect({ servers: [env.addr] });
  const tryOne = async (name, opts) => {
    try {
      const l = await other.acquire(name, opts);
      await l.release();
      return 'ok';
    } catch (e) {
      return e.code;
    }
  };
  try {
    const locks = await client.acquireAll(['kind:x', { name: 'kind:s', shared: true },
      { name: 'kind:m', limit: 2, permits: 2 }]);
    assert.deepEqual(locks.map((l) => l.resource), ['kind:x', 'kind:s', 'kind:m']);
    assert.equal(locks[1].shared, true);
    assert.equal(locks[2].limit, 2);
    assert.equal(await tryOne('kind:s', { shared: true }), 'ok');
    assert.equal(await tryOne('kind:s', {}), 'NOT_ACQUIRED');
    assert.equal(await tryOne('kind:x', { shared: true }), 'NOT_ACQUIRED');
    assert.equal(await tryOne('kind:m', { limit: 2 }), 'NOT_ACQUIRED');
    for (const l of locks) await l.release();
    // The call's kind for plain names; an entry's own replaces it for that one.
    const mixed = await client.acquireAll(['kind:x', { name: 'kind:s' }], { shared: true });
    assert.deepEqual(mixed.map((l) => l.shared), [true, false]);
    for (const l of mixed) await l.release();
    await assert.rejects(client.acquireAll([{ name: 'kind:m', permits: 1 }]), TypeError);
    await assert.rejects(client.acquireAll([{ name: 'kind:s', shared: 'yes' }]), TypeError);
    await assert.rejects(client.acquireAll([null]), TypeError);
  } finally {
    await client.close();
    await other.close();
  }
});

test('a lock lost while the next is awaited fails the set; the next is given back', async () => {
  const holder = await connect({ servers: [env.addr] });
  const client = await connect({ servers: [env.addr] });
  try {
    const b = await holder.acquire('lost:B', { ttl: 30000 });
    const p = client.acquireAll(['lost:B', 'lost:A'], { ttl: 3000, wait: 20000 }).then(() => null, (e) => e);
    await waitFor('A held and B awaited', async () => {
      const s = await holder.stats();
      return s.heldLocks === 2 && s.waiters === 1;
    }, 10000);
    await env.redis.command('DEL', env.key('lost:A'));
    await waitFor('the loss of A', async () => (await holder.stats()).heldLocks === 1, 10000);
    await b.release();
    const err = await p;
    assert.ok(err instanceof RlockError, String(err));
    assert.equal(err.code, 'NOT_ACQUIRED');
    assert.equal(err.resource, 'lost:A');
    await waitFor('B given back', async () => (await holder.stats()).heldLocks === 0, 10000);
  } finally {
    await holder.close();
    await client.close();
  }
});

test('usingAll: the loss of any lock aborts the signal, and usingAll rejects with it', async () => {
  const client = await connect({ servers: [env.addr] });
  try {
    const err = await client.usingAll(['ua:1', 'ua:2'], { ttl: 1500 }, async (signal) => {
      await env.redis.command('DEL', env.key('ua:2'));
      await new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('the signal did not abort within 20 s')), 20000);
        signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
      });
    }).then(() => null, (e) => e);
    assert.ok(err instanceof RlockError, String(err));
    assert.equal(err.code, 'LOCK_LOST');
    assert.equal(err.resource, 'ua:2');
    await waitFor('both released', async () => (await client.stats()).heldLocks === 0, 10000);
  } finally {
    await client.close();
  }
});

test('acquire() takes no owner from a third argument (Array.prototype.map passes one)', async () => {
  const client = await connect({ servers: [env.addr] });
  try {
    const locks = await Promise.all(['map:a', 'map:b'].map(client.acquire, client));
    assert.deepEqual(locks.map((l) => l.resource), ['map:a', 'map:b']);
    for (const l of locks) await l.release();
  } finally {
    await client.close();
  }
});

test('bad arguments', async () => {
  const client = await connect({ servers: [env.addr] });
  try {
    await assert.rejects(client.acquireAll([]), TypeError);
    await assert.rejects(client.acquireAll(Array.from({ length: 17 }, (_, i) => `bad:${i}`)), TypeError);
    await assert.rejects(client.acquireAll(['bad:x', 'bad:y', 'bad:x']), /named twice/);
    await assert.rejects(client.acquireAll(['bad:x', '']), TypeError);
    assert.equal((await client.stats()).heldLocks, 0);
  } finally {
    await client.close();
  }
});
