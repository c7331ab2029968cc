// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// An acquire that does not get its lock says who holds it: err.holder and the
// message (docs/protocol.md §6.1, Holder), for a holder of this daemon (a try
// and a wait) and for a key the copied SET NX PX code set in Redis.

const test = require('node:test');
const assert = require('node:assert/strict');
const { startEnv } = require('./helpers/env');
const { connect, RlockError } = require('..');

let env;
test.before(async () => { env = await startEnv(); });
test.after(async () => { if (env) await env.stop(); });

async function refusal(p) {
  const err = await p.then(() => null, (e) => e);
  assert.ok(err instanceof RlockError, `not refused: ${err}`);
  return err;
}

test('a holder of this daemon: session id, client name, owner, grant time, validity left', async () => {
  const a = await connect({ servers: [env.addr], name: 'holder-a' });
  const b = await connect({ servers: [env.addr], name: 'holder-b' });
  try {
    const t0 = Date.now();
    const lock = await a.acquire('who:here', { owner: 7, ttl: 10000 });
    const t1 = Date.now();
    for (const [wait, code] of [[0, 'NOT_ACQUIRED'], [300, 'TIMEOUT']]) {
      const err = await refusal(b.acquire('who:here', { wait, ttl: 10000 }));
      assert.equal(err.code, code);
      const h = err.holder;
      assert.equal(h.here, true);
      assert.equal(h.sessionId, a.sessionId);
      assert.equal(h.clientName, 'holder-a');
      assert.equal(h.owner, 7n);
      assert.equal(h.shared, false);
      assert.equal(h.holders, 1);
      assert.ok(h.since >= t0 - 1 && h.since <= t1 + 1, `since ${h.since} outside [${t0}, ${t1}]`);
      assert.ok(h.ttlLeftMs > 0 && h.ttlLeftMs <= 10000, `ttlLeftMs ${h.ttlLeftMs}`);
      assert.match(err.message, new RegExp(`held by session ${a.sessionId} \\(client "holder-a", owner 7\\) since .*Z, \\d+ ms left`));
    }
    await lock.release();
  } finally {
    await a.close();
    await b.close();
  }
});

test('a key the copied code set with SET NX PX: held outside this daemon, ttl left', async () => {
  const c = await connect({ servers: [env.addr] });
  try {
    await env.redis.command('SET', env.key('who:seed'), '0f7c1d2e-seed-app-token', 'NX', 'PX', '5000');
    for (const [wait, code] of [[0, 'NOT_ACQUIRED'], [300, 'TIMEOUT']]) {
      const err = await refusal(c.acquire('who:seed', { wait }));
      assert.equal(err.code, code);
      assert.equal(err.holder.here, false);
      assert.equal(err.holder.foreign, true);
      assert.ok(err.holder.ttlLeftMs > 0 && err.holder.ttlLeftMs <= 5000, `ttlLeftMs ${err.holder.ttlLeftMs}`);
      assert.match(err.message, /held outside this daemon \(not by rlockd\), ttl left \d+ ms$/);
    }
    // Other refusals carry none.
    await c.acquire('who:other', { ttl: 10 }).then(() => assert.fail('granted'), (e) => {
      assert.equal(e.code, 'INVALID');
      assert.equal(e.holder, undefined);
    });
  } finally {
    await c.close();
  }
});
