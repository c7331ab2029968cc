// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Semaphores: { limit, permits } on acquire / using / acquireAll / usingAll.
// Up to `limit` permits held at once across clients, each holder taking
// `permits` all or none; FIFO within the daemon (the head holds back smaller
// requests); every holder names the same limit, a name is a semaphore or a
// lock (else WRONG_KIND); in one client a semaphore is held once; a session
// that ends uncleanly gives its permits back.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const { setTimeout: sleep } = require('node:timers/promises');
const { waitFor } = require('./helpers/env');
const { kindsSuite, track, failure, afterRestart } = require('./helpers/kinds');
const { connect, RlockError } = require('..');

const PKG = path.join(__dirname, '..');

const suite = kindsSuite('sem');
const { withClients, keysOf } = suite;

async function code(p) {
  const err = await failure(p);
  assert.ok(err instanceof RlockError, String(err));
  return err.code;
}


/** The permits HASH of a semaphore as an object: token -> permits, and used. */
async function permitsHash(resource) {
  const flat = await suite.env.redis.command('HGETALL', `${suite.env.key(resource)}:permits`);
  const out = {};
  for (let i = 0; i < flat.length; i += 2) out[flat[i]] = Number(flat[i + 1]);
  return out;
}

async function used(resource) {
  return Number(await suite.env.redis.command('HGET', `${suite.env.key(resource)}:permits`, 'used') ?? 0);
}

async function waiters(client) {
  return (await client.stats()).waiters;
}

test('limit 3, five clients: three hold a permit at once, the fourth waits until one is released', () => withClients(5, async (...cs) => {
  const held = [];
  for (const c of cs.slice(0, 3)) held.push(await c.acquire('sem:three', { limit: 3, ttl: 10000 }));
  for (const l of held) {
    assert.equal(l.limit, 3);
    assert.equal(l.permits, 1);
    assert.equal(l.shared, false);
    assert.equal(l.holdCount, 1);
    assert.equal(l.state, 'held');
  }
  assert.equal(new Set(held.map((l) => l.token)).size, 3);
  assert.ok(held[0].fence < held[1].fence && held[1].fence < held[2].fence);

  // Redis: the marker, the holders' ZSET, the permits HASH with `used` their sum.
  assert.equal(await suite.env.redis.command('GET', suite.env.key('sem:three')), 'group:sem:3');
  assert.equal(Number(await suite.env.redis.command('ZCARD', `${suite.env.key('sem:three')}:holders`)), 3);
  const h = await permitsHash('sem:three');
  assert.equal(h.used, 3);
  for (const l of held) assert.equal(h[l.token], 1);

  // The listing: one entry per holding session, with its limit and permits.
  const listed = await cs[4].locks({ prefix: 'sem:three' });
  assert.equal(listed.length, 3);
  assert.deepEqual(listed.map((l) => l.sessionId).sort(), cs.slice(0, 3).map((c) => c.sessionId).sort());
  for (const l of listed) {
    assert.equal(l.limit, 3);
    assert.equal(l.permits, 1);
    assert.equal(l.shared, false);
  }

  // Full: a try fails, a wait waits (both of them).
  assert.equal(await code(cs[3].acquire('sem:three', { limit: 3 })), 'NOT_ACQUIRED');
  const p4 = track(cs[3].acquire('sem:three', { limit: 3, wait: 30000, ttl: 10000 }));
  const p5 = track(cs[4].acquire('sem:three', { limit: 3, wait: 30000, ttl: 10000 }));
  await waitFor('two waiters', async () => (await waiters(cs[4])) === 2);
  await sleep(300);
  assert.equal(p4.outcome, 'pending', 'a fourth permit was granted');
  assert.equal(p5.outcome, 'pending', 'a fifth permit was granted');

  // One released: the first waiter gets its permit, the second keeps waiting.
  assert.equal(await held[1].release(), 0);
  const l4 = await p4.done;
  assert.equal(l4.permits, 1);
  assert.ok(l4.fence > held[2].fence);
  await sleep(300);
  assert.equal(p5.outcome, 'pending', 'the fifth was granted with three permits held');
  assert.equal(await used('sem:three'), 3);

  assert.equal(await held[0].release(), 0);
  const l5 = await p5.done;
  assert.ok(l5.fence > l4.fence);
  for (const l of [held[2], l4, l5]) assert.equal(await l.release(), 0);
  await waitFor('the keys gone', async () => (await keysOf('sem:three')).length === 0);
}));

test('permits: limit 5, A holds 3; B asks 3 and waits; C asks 2 and is granted only after B (FIFO)', () => withClients(4, async (a, b, c, d) => {
  const la = await a.acquire('sem:fifo', { limit: 5, permits: 3, ttl: 10000 });
  assert.equal(la.permits, 3);
  assert.equal(la.limit, 5);
  assert.equal(await used('sem:fifo'), 3);

  // B wants 3 of the 2 free: all or none, so it waits with nothing taken.
  const pb = track(b.acquire('sem:fifo', { limit: 5, permits: 3, wait: 30000, ttl: 10000 }));
  await waitFor('B waiting', async () => (await waiters(a)) === 1);
  assert.equal(await used('sem:fifo'), 3);
  // C wants 2, which are free, but B is ahead of it: C waits too.
  const pc = track(c.acquire('sem:fifo', { limit: 5, permits: 2, wait: 30000, ttl: 10000 }));
  await waitFor('B and C waiting', async () => (await waiters(a)) === 2);
  // A try of 1 does not pass the queue either.
  assert.equal(await code(d.acquire('sem:fifo', { limit: 5 })), 'NOT_ACQUIRED');
  await sleep(300);
  assert.equal(pb.outcome, 'pending', 'B was granted 3 with only 2 free');
  assert.equal(pc.outcome, 'pending', 'C passed B, the head of the queue');
  assert.equal(await used('sem:fifo'), 3);

  // A releases: B (3) and then C (2) fit.
  assert.equal(await la.release(), 0);
  const lb = await pb.done;
  const lc = await pc.done;
  assert.equal(lb.permits, 3);
  assert.equal(lc.permits, 2);
  assert.ok(lc.fence > lb.fence, `C (fence ${lc.fence}) was granted before B (fence ${lb.fence})`);
  const h = await permitsHash('sem:fifo');
  assert.equal(h.used, 5);
  assert.equal(h[lb.token], 3);
  assert.equal(h[lc.token], 2);
  assert.equal(h[la.token], undefined);
  const listed = await d.locks({ prefix: 'sem:fifo' });
  assert.deepEqual(listed.map((l) => l.permits).sort(), [2, 3]);

  // Full: nothing more, not even one permit.
  assert.equal(await code(d.acquire('sem:fifo', { limit: 5 })), 'NOT_ACQUIRED');
  assert.equal(await lb.release(), 0);
  assert.equal(await used('sem:fifo'), 2);
  const ld = await d.acquire('sem:fifo', { limit: 5, permits: 3 });
  assert.equal(await used('sem:fifo'), 5);
  await ld.release();
  await lc.release();
  await waitFor('the keys gone', async () => (await keysOf('sem:fifo')).length === 0);
}));

test('WRONG_KIND: another limit, a lock on a semaphore, a semaphore on a lock (with or without wait)', () => withClients(2, async (c1, c2) => {
  const s = await c1.acquire('sem:kind', { limit: 3 });
  for (const opts of [{}, { wait: 2000 }]) {
    assert.equal(await code(c2.acquire('sem:kind', { ...opts, limit: 4 })), 'WRONG_KIND');
    assert.equal(await code(c2.acquire('sem:kind', { ...opts, limit: 1 })), 'WRONG_KIND');
    assert.equal(await code(c2.acquire('sem:kind', opts)), 'WRONG_KIND');
    assert.equal(await code(c2.acquire('sem:kind', { ...opts, shared: true })), 'WRONG_KIND');
  }
  // Nothing changed: the same limit still gets a permit.
  assert.equal(await suite.env.redis.command('GET', suite.env.key('sem:kind')), 'group:sem:3');
  assert.equal(await used('sem:kind'), 1);
  const s2 = await c2.acquire('sem:kind', { limit: 3 });
  assert.equal(await used('sem:kind'), 2);
  await s2.release();
  await s.release();
  await waitFor('the keys gone', async () => (await keysOf('sem:kind')).length === 0);

  // The reverse: a name held as a lock (exclusive, or shared) refuses a semaphore.
  const x = await c1.acquire('sem:kind:lock');
  const r = await c1.acquire('sem:kind:rw', { shared: true });
  for (const name of ['sem:kind:lock', 'sem:kind:rw']) {
    for (const opts of [{}, { wait: 2000 }]) {
      assert.equal(await code(c2.acquire(name, { ...opts, limit: 3 })), 'WRONG_KIND', name);
    }
  }
  assert.equal(x.state, 'held');
  assert.equal(await suite.env.redis.command('GET', suite.env.key('sem:kind:lock')), x.token);
  assert.equal(await suite.env.redis.command('GET', suite.env.key('sem:kind:rw')), 'group:rw');
  await x.release();
  await r.release();
  // Free again: the name may become a semaphore now.
  const t = await c2.acquire('sem:kind:lock', { limit: 2 });
  assert.equal(t.limit, 2);
  await t.release();
}));

test('one client holds a semaphore once: its owner re-enters, another owner waits', () => withClients(2, async (c, other) => {
  const a = await c.acquire('sem:once', { limit: 3, owner: 5 });
  // Re-entry: same token, fence and permits, one hold more; no more permits used.
  const b = await c.acquire('sem:once', { limit: 3, owner: 5 });
  assert.equal(b.token, a.token);
  assert.equal(b.fence, a.fence);
  assert.equal(b.permits, 1);
  assert.equal(b.holdCount, 2);
  assert.equal(await used('sem:once'), 1);
  // More permits than the owner holds: WRONG_KIND.
  assert.equal(await code(c.acquire('sem:once', { limit: 3, permits: 2, owner: 5 })), 'WRONG_KIND');
  assert.equal(await code(c.acquire('sem:once', { limit: 3, owner: 5, reentry: false })), 'ALREADY_HELD');
  // Another owner of the same client (every acquire without owner is one) does not get a second permit.
  assert.equal(await code(c.acquire('sem:once', { limit: 3 })), 'NOT_ACQUIRED');
  assert.equal(await code(c.acquire('sem:once', { limit: 3, owner: 6 })), 'NOT_ACQUIRED');
  // ...while another client does.
  const o = await other.acquire('sem:once', { limit: 3 });
  assert.equal(await used('sem:once'), 2);
  const pw = track(c.acquire('sem:once', { limit: 3, wait: 30000 }));
  await waitFor('the other owner waiting', async () => (await waiters(other)) === 1);
  assert.equal(await b.release(), 1);
  await sleep(200);
  assert.equal(pw.outcome, 'pending');
  assert.equal(await a.release(), 0);
  const w = await pw.done;
  assert.notEqual(w.token, a.token);
  assert.equal(await used('sem:once'), 2);
  await w.release();
  await o.release();
  assert.equal((await c.stats()).heldLocks, 0);
}));

test('a client gone without a Goodbye gives its permit back to a waiter', () => withClients(2, async (waiter, observer) => {
  const doomed = await connect({ servers: [suite.env.addr], name: 'sem-doomed' });
  const held = [];
  try {
    held.push(await doomed.acquire('sem:gone', { limit: 2, permits: 2, ttl: 30000 }));
    const pw = track(waiter.acquire('sem:gone', { limit: 2, wait: 30000 }));
    await waitFor('the waiter', async () => (await waiters(observer)) === 1);
    await sleep(200);
    assert.equal(pw.outcome, 'pending');
    const closed = once(doomed, 'close');
    doomed._engine.link.sock.destroy(); // the connection breaks: no Goodbye
    const [why] = await closed;
    assert.ok(why instanceof RlockError, String(why));
    assert.equal(held[0].state, 'lost');
    // Long before the 30 s lease ends, the daemon ended the session and gave the permits back.
    const w = await pw.done;
    assert.equal(w.permits, 1);
    assert.ok(w.fence > held[0].fence);
    const h = await permitsHash('sem:gone');
    assert.equal(h.used, 1);
    assert.equal(h[held[0].token], undefined);
    assert.deepEqual((await observer.locks({ prefix: 'sem:gone' })).map((l) => l.sessionId), [waiter.sessionId]);
    await w.release();
    await waitFor('the keys gone', async () => (await keysOf('sem:gone')).length === 0);
  } finally {
    await doomed.close();
  }
}));

test('using, acquireAll and usingAll with limit', () => withClients(3, async (c1, c2, c3) => {
  // using: at most 2 inside at once out of 3 clients.
  let inside = 0;
  let maxInside = 0;
  await Promise.all([c1, c2, c3].map((c) => c.using('sem:using', { limit: 2, wait: 30000 }, async (signal, lock) => {
    assert.equal(lock.limit, 2);
    inside += 1;
    maxInside = Math.max(maxInside, inside);
    assert.ok(inside <= 2);
    await sleep(300);
    signal.throwIfAborted();
    inside -= 1;
  })));
  assert.equal(maxInside, 2);
  await waitFor('the keys gone', async () => (await keysOf('sem:using')).length === 0);
  // Released also when fn throws.
  const err = await failure(c1.using('sem:using', { limit: 2 }, async () => { throw new Error('boom'); }));
  assert.equal(err.message, 'boom');
  await waitFor('the keys gone after a throw', async () => (await keysOf('sem:using')).length === 0);

  // acquireAll: permits of every name; all or none.
  const set1 = await c1.acquireAll(['sem:all:b', 'sem:all:a'], { limit: 3, permits: 2 });
  assert.deepEqual(set1.map((l) => [l.resource, l.limit, l.permits]), [['sem:all:b', 3, 2], ['sem:all:a', 3, 2]]);
  assert.equal(await used('sem:all:a'), 2);
  const e1 = await failure(c2.acquireAll(['sem:all:a', 'sem:all:b'], { limit: 3, permits: 2 }));
  assert.equal(e1.code, 'NOT_ACQUIRED');
  assert.equal(e1.resource, 'sem:all:a');
  const e2 = await failure(c2.acquireAll(['sem:all:a', 'sem:all:b'], { limit: 4 }));
  assert.equal(e2.code, 'WRONG_KIND');
  const set2 = await c2.acquireAll(['sem:all:a', 'sem:all:b'], { limit: 3 });
  assert.equal(await used('sem:all:b'), 3);
  for (const l of [...set1, ...set2]) await l.release();
  let both = 0;
  await Promise.all([c1, c2].map((c) => c.usingAll(['sem:all:a', 'sem:all:b'], { limit: 2, wait: 10000 }, async (signal, locks) => {
    assert.ok(locks.every((l) => l.limit === 2 && l.permits === 1));
    both += 1;
    await waitFor('both sets inside', async () => both === 2, 10000, 5);
  })));
  await waitFor('every key gone', async () => (await keysOf('sem:all:a')).length + (await keysOf('sem:all:b')).length === 0);
}));

test('the README example: at most 3 exports at once', async () => {
  const readme = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8');
  const at = readme.indexOf('<!-- example: exports -->');
  assert.ok(at >= 0, 'no example exports in README.md');
  const src = /```js\n([\s\S]*?)```/.exec(readme.slice(at))[1];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlnode-exports.'));
  const observer = await connect({ servers: [suite.env.addr], name: 'sem-observer' });
  try {
    fs.mkdirSync(path.join(dir, 'node_modules'));
    fs.symlinkSync(PKG, path.join(dir, 'node_modules', 'rlockd'), 'dir');
    fs.writeFileSync(path.join(dir, 'example.js'), src);
    const runs = ['j1', 'j2', 'j3', 'j4', 'j5'].map((job) => {
      const child = spawn(process.execPath, ['example.js', job], {
        cwd: dir, env: { ...process.env, RLOCKD_SERVERS: suite.env.addr, EXPORT_MS: '1500' }, stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let errOut = '';
      child.stdout.on('data', (b) => { out += b; });
      child.stderr.on('data', (b) => { errOut += b; });
      const killer = setTimeout(() => child.kill('SIGKILL'), 60000);
      return new Promise((resolve) => child.on('close', (rc) => {
        clearTimeout(killer);
        resolve({ job, rc, out, errOut });
      }));
    });
    let most = 0;
    let finished = false;
    const all = Promise.all(runs).finally(() => { finished = true; });
    while (!finished) {
      const holders = await observer.locks({ prefix: 'exports' });
      assert.ok(holders.length <= 3, `${holders.length} exports at once`);
      assert.ok(holders.every((l) => l.limit === 3 && l.permits === 1));
      assert.ok(await used('exports') <= 3);
      most = Math.max(most, holders.length);
      await sleep(50);
    }
    for (const r of await all) {
      assert.equal(r.rc, 0, `${r.job}: ${r.errOut}`);
      assert.equal(r.out, `export ${r.job}: running with 1 of 3 permits\nexport ${r.job}: done\n`);
    }
    assert.equal(most, 3);
    assert.deepEqual(await keysOf('exports'), []);
  } finally {
    await observer.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a session move takes the permits along: still held, renewed, counted once', () =>
  // The new daemon adopts the permit's place among the holders (adopt.lua), its permits
  // moved to the new token.
  afterRestart('sem-move', 'mv:sem', { limit: 3, permits: 2 }, async ({ menv, client, lock: s, more }) => {
    assert.equal(s.limit, 3);
    assert.equal(s.permits, 2);
    const hash = `${menv.key('mv:sem')}:permits`;
    assert.equal(await menv.redis.command('GET', menv.key('mv:sem')), 'group:sem:3');
    assert.equal(await menv.redis.command('HGET', hash, 'used'), '2');
    assert.equal(await menv.redis.command('HGET', hash, s.token), null); // the adopting daemon's token now
    assert.equal(Number(await menv.redis.command('ZCARD', `${menv.key('mv:sem')}:holders`)), 1);
    const [info] = await client.locks({ prefix: 'mv:sem' });
    assert.equal(info.limit, 3);
    assert.equal(info.permits, 2);
    // One permit is left for others.
    const o = await (await more('sem-move-2')).acquire('mv:sem', { limit: 3 });
    assert.equal((await failure((await more('sem-move-3')).acquire('mv:sem', { limit: 3 }))).code, 'NOT_ACQUIRED');
    assert.equal(await o.release(), 0);
    assert.equal(await s.release(), 0);
    assert.equal(await menv.redis.command('HGET', hash, 'used'), null);
  }));

test('bad arguments', () => withClients(1, async (c) => {
  for (const [opts, Err] of [
    [{ permits: 1 }, TypeError],            // permits without limit
    [{ limit: 3, shared: true }, TypeError], // a semaphore is never shared
    [{ limit: '3' }, TypeError],
    [{ limit: 3, permits: '1' }, TypeError],
    [{ limit: 0 }, RangeError],
    [{ limit: -1 }, RangeError],
    [{ limit: 1.5 }, RangeError],
    [{ limit: 1000001 }, RangeError],
    [{ limit: NaN }, RangeError],
    [{ limit: 3, permits: 0 }, RangeError],
    [{ limit: 3, permits: 4 }, RangeError],
    [{ limit: 3, permits: 2.5 }, RangeError],
  ]) {
    await assert.rejects(c.acquire('sem:bad', opts), Err, JSON.stringify(opts));
    await assert.rejects(c.using('sem:bad', opts, async () => assert.fail('ran')), Err, JSON.stringify(opts));
    await assert.rejects(c.acquireAll(['sem:bad', 'sem:bad2'], opts), Err, JSON.stringify(opts));
    await assert.rejects(c.usingAll(['sem:bad'], opts, async () => assert.fail('ran')), Err, JSON.stringify(opts));
  }
  // The bounds themselves are fine.
  const big = await c.acquire('sem:bad', { limit: 1000000, permits: 1000000 });
  assert.equal(big.permits, 1000000);
  await big.release();
  const one = await c.acquire('sem:bad', { limit: 1 });
  assert.equal(one.permits, 1);
  await one.release();
  assert.equal((await c.stats()).heldLocks, 0);
  assert.deepEqual(await keysOf('sem:bad'), []);
}));
