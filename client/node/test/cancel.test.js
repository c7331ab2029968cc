// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Withdrawing acquires through their AbortSignal: the Acquire still gets its
// one answer, a grant that raced the Cancel is given back, and nothing is
// left behind — no key in Redis, no waiter or lock in the daemon.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { startEnv, waitFor } = require('./helpers/env');
const { connect, RlockError } = require('..');

let env;
test.before(async () => { env = await startEnv(); });
test.after(async () => { if (env) await env.stop(); });

test('an already aborted signal: rejected at once, nothing sent', async () => {
  const client = await connect({ servers: [env.addr] });
  try {
    const ac = new AbortController();
    ac.abort(new Error('changed my mind'));
    const before = (await client.stats()).acquires;
    const err = await client.acquire('cancel:pre', { signal: ac.signal }).then(() => null, (e) => e);
    assert.ok(err instanceof RlockError);
    assert.equal(err.name, 'AbortError');
    assert.equal(err.code, 'CANCELLED');
    assert.equal(err.cause.message, 'changed my mind');
    assert.equal((await client.stats()).acquires, before);
  } finally {
    await client.close();
  }
});

test('a waiting acquire is withdrawn: CANCELLED, and the waiter leaves the daemon', async () => {
  const holder = await connect({ servers: [env.addr] });
  const client = await connect({ servers: [env.addr] });
  try {
    const held = await holder.acquire('cancel:wait', { ttl: 30000 });
    const ac = new AbortController();
    const p = client.acquire('cancel:wait', { wait: 60000, signal: ac.signal });
    await waitFor('the waiter to queue', async () => (await client.stats()).waiters === 1, 10000);
    ac.abort();
    const err = await p.then(() => null, (e) => e);
    assert.equal(err.code, 'CANCELLED');
    assert.equal((await client.stats()).waiters, 0);
    await held.release();
  } finally {
    await holder.close();
    await client.close();
  }
});

test('1,000 acquire-then-abort races leave no lock and no waiter behind', async (t) => {
  const resources = ['race:a', 'race:b', 'race:c'];
  const client = await connect({ servers: [env.addr], name: 'races' });
  const holder = await connect({ servers: [env.addr], name: 'races-holder' });
  // Another session holds each resource part of the time, so that some
  // acquires wait (withdrawn from the queue) and others try at once (withdrawn
  // with their try in Redis, or granted before the Cancel arrives).
  let stop = false;
  const churn = (async () => {
    while (!stop) {
      const r = resources[Math.floor(Math.random() * resources.length)];
      const l = await holder.acquire(r, { wait: 2000 }).catch(() => null);
      await sleep(Math.floor(Math.random() * 4));
      if (l) await l.release();
    }
  })();
  const outcomes = { granted: 0, aborted: 0, other: 0 };
  try {
    const total = 1000;
    const batch = 10;
    for (let i = 0; i < total; i += batch) {
      await Promise.all(Array.from({ length: batch }, async (_, k) => {
        const ac = new AbortController();
        const p = client.acquire(resources[(i + k) % resources.length], { ttl: 5000, wait: 5000, signal: ac.signal });
        const delay = Math.floor(Math.random() * 4);
        if (delay === 0) ac.abort();
        else setTimeout(() => ac.abort(), delay - 1);
        try {
          const lock = await p;
          outcomes.granted++;
          await lock.release();
        } catch (e) {
          if (e.code === 'CANCELLED' && e.name === 'AbortError') outcomes.aborted++;
          else {
            outcomes.other++;
            throw e;
          }
        }
      }));
    }
    assert.equal(outcomes.granted + outcomes.aborted, total);
    assert.ok(outcomes.aborted > 0, `no acquire was withdrawn: ${JSON.stringify(outcomes)}`);
  } finally {
    stop = true;
    await churn;
    await holder.close();
  }
  try {
    await waitFor('no lock key in Redis and nothing held or waiting in the daemon', async () => {
      const st = await client.stats();
      return st.heldLocks === 0 && st.waiters === 0 && (await env.lockKeys()).length === 0;
    }, 20000);
    assert.equal(client.closed, false);
  } finally {
    await client.close();
  }
  t.diagnostic(`outcomes ${JSON.stringify(outcomes)}`);
});
