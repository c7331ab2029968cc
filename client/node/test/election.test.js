// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Leader elections: campaign (an exclusive acquire with a value; the term is
// the grant's fence; release is resign), lead, leader, observe (the leader
// now, then LeaderChanged events in order of terms). A leader whose process
// is killed gives the lead to a waiting candidate, in a higher term.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const { setTimeout: sleep } = require('node:timers/promises');
const { startEnv, waitFor, RLOCKD_BIN } = require('./helpers/env');
const { kindsSuite, track, failure } = require('./helpers/kinds');
const {
  connect, RlockError, Leadership, Lock, Observer,
} = require('..');
const { toU64 } = require('../lib/codec');
const { isNews, checkValue } = require('../lib/elect');

const PKG = path.join(__dirname, '..');

const suite = kindsSuite('elect');
const { withClients } = suite;

const NOBODY = { elected: false, term: 0n, value: '', ttlMs: 0 };

/**
 * Records what an observer reports (`changes`) and the raw LeaderChanged
 * events its client receives for the election (`raw`), to check the
 * daemon's order as well as the client's; next() waits for the next change.
 */
function recorder(client, resource) {
  const r = { changes: [], raw: [], waiting: [] };
  const hooks = client._engine.hooks;
  const inner = hooks.onLeader;
  hooks.onLeader = (ev) => {
    if (ev.resource === resource) {
      r.raw.push({ elected: Boolean(ev.elected), term: BigInt(ev.term.toString()), value: ev.value });
    }
    inner(ev);
  };
  r.onChange = (c) => {
    r.changes.push(c);
    const w = r.waiting.shift();
    if (w) w();
  };
  /** The next change not yet taken, waiting up to ms for it. */
  let taken = 0;
  r.next = async (ms = 10000) => {
    if (taken >= r.changes.length) {
      await new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no change of ${resource} within ${ms} ms (seen: ${fmt(r.changes)})`)), ms);
        r.waiting.push(() => { clearTimeout(t); resolve(); });
      });
    }
    return r.changes[taken++];
  };
  r.pending = () => r.changes.length - taken;
  return r;
}

function fmt(changes) {
  return JSON.stringify(changes.map((c) => [c.elected, String(c.term), c.value]));
}

/** Terms never go down; an elected change has a term above every earlier one; elected false repeats the last term. */
function assertInOrder(changes, start, what) {
  let last = start;
  for (const c of changes) {
    if (c.elected) {
      assert.ok(c.term > last.term, `${what}: elected in term ${c.term} after term ${last.term}: ${fmt(changes)}`);
    } else {
      assert.ok(last.elected, `${what}: elected false twice in a row: ${fmt(changes)}`);
      assert.equal(c.term, last.term, `${what}: elected false with another term: ${fmt(changes)}`);
      assert.equal(c.value, '');
    }
    last = c;
  }
}

test('what an observer is told: a higher term, or its leader gone; never a repeat or an older term', () => {
  const e = (term, value = 'v') => ({ elected: true, term, value });
  const none = (term) => ({ elected: false, term, value: '' });
  assert.equal(isNews(e(5n), null), true);
  assert.equal(isNews(e(5n), none(0n)), true);
  assert.equal(isNews(e(6n), e(5n)), true);
  assert.equal(isNews(none(5n), e(5n)), true);
  assert.equal(isNews(e(7n), none(5n)), true);
  assert.equal(isNews(none(7n), none(5n)), true); // a leader that came and went unseen
  assert.equal(isNews(e(5n), e(5n)), false);
  assert.equal(isNews(e(5n, 'other'), e(5n)), false);
  assert.equal(isNews(e(5n), none(5n)), false);
  assert.equal(isNews(none(5n), none(5n)), false);
  assert.equal(isNews(e(4n), e(5n)), false);
  assert.equal(isNews(none(4n), e(5n)), false);
  for (const ok of ['', 'x'.repeat(1024), '€'.repeat(341), 'host-a:8080']) checkValue(ok);
  assert.throws(() => checkValue('\ud800'), /lone surrogate/);
});

test('a campaign is granted with a term; leader() shows its value, then nobody after resign', () => withClients(2, async (cand, other) => {
  const l = await cand.campaign('el:one', 'node-a:8080', { ttl: 10000 });
  assert.ok(l instanceof Leadership);
  assert.ok(l instanceof Lock);
  assert.equal(l.term, l.fence);
  assert.equal(typeof l.term, 'bigint');
  assert.ok(l.term > 0n);
  assert.equal(l.value, 'node-a:8080');
  assert.equal(l.state, 'held');
  assert.equal(l.shared, false);
  assert.equal(l.limit, 0);
  assert.equal(await suite.env.redis.command('GET', suite.env.key('el:one')), l.token);

  for (const c of [cand, other]) {
    const now = await c.leader('el:one');
    assert.equal(now.elected, true);
    assert.equal(now.term, l.term);
    assert.equal(now.value, 'node-a:8080');
    assert.ok(now.ttlMs > 0 && now.ttlMs <= 10000, `ttlMs ${now.ttlMs}`);
  }
  // The election's name is an exclusive lock: another candidate, or a plain acquire, does not get it.
  assert.equal((await failure(other.campaign('el:one', 'node-b'))).code, 'NOT_ACQUIRED');
  assert.equal((await failure(other.acquire('el:one'))).code, 'NOT_ACQUIRED');

  assert.equal(await l.resign(), 0);
  assert.equal(l.state, 'released');
  assert.deepEqual(await other.leader('el:one'), NOBODY);
  // Released like any lock: no hold left, a second resign refused by the client.
  assert.equal((await failure(l.release())).code, 'NOT_HELD');
  assert.equal((await cand.stats()).heldLocks, 0);
}));

test('the owner leading re-enters (same term, the first value); a campaign over its own plain lock is WRONG_KIND', () => withClients(2, async (c, other) => {
  const a = await c.campaign('el:re', 'first', { owner: 9 });
  const b = await c.campaign('el:re', 'second', { owner: 9 });
  assert.ok(b instanceof Leadership);
  assert.equal(b.holdCount, 2);
  assert.equal(b.term, a.term);
  assert.equal(b.value, 'first');
  assert.equal((await other.leader('el:re')).value, 'first');
  assert.equal((await failure(c.campaign('el:re', 'first', { owner: 9, reentry: false }))).code, 'ALREADY_HELD');
  assert.equal((await failure(c.campaign('el:re', 'first', { owner: 10 }))).code, 'NOT_ACQUIRED');
  assert.equal(await b.resign(), 1);
  assert.equal((await other.leader('el:re')).term, a.term);
  assert.equal(await a.resign(), 0);
  assert.deepEqual(await other.leader('el:re'), NOBODY);

  const plain = await c.acquire('el:re:plain', { owner: 5 });
  const err = await failure(c.campaign('el:re:plain', 'v', { owner: 5 }));
  assert.equal(err.code, 'WRONG_KIND');
  assert.equal(plain.state, 'held');
  await plain.release();
  // A leadership's lease is extended like any lock's, and the leader's with it.
  const l = await c.campaign('el:re:ext', 'v', { ttl: 2000, watchdog: false });
  assert.equal((await l.extend(20000)).ttl, 20000);
  const now = await other.leader('el:re:ext');
  assert.ok(now.ttlMs > 2000, `ttlMs ${now.ttlMs} after extend(20000)`);
  await l.resign();
}));

test('leader() with none: a name never used, a plain lock, a lock released', () => withClients(1, async (c) => {
  assert.deepEqual(await c.leader('el:none'), NOBODY);
  const plain = await c.acquire('el:none:plain');
  // A plain lock is nobody's leadership.
  assert.deepEqual(await c.leader('el:none:plain'), NOBODY);
  await plain.release();
  // "" is a value like any other.
  const l = await c.campaign('el:none:empty', '');
  assert.deepEqual({ ...(await c.leader('el:none:empty')), ttlMs: 0 }, { elected: true, term: l.term, value: '', ttlMs: 0 });
  await l.release();
  assert.deepEqual(await c.leader('el:none:empty'), NOBODY);
}));

test('a second candidate waits, and wins after the leader resigns, in a higher term', () => withClients(3, async (a, b, watcher) => {
  const la = await a.campaign('el:two', 'alpha');
  const pb = track(b.campaign('el:two', 'beta', { wait: 30000 }));
  await waitFor('the waiting candidate', async () => (await watcher.stats()).waiters === 1);
  await sleep(300);
  assert.equal(pb.outcome, 'pending', 'a second leader was granted');
  const now = await watcher.leader('el:two');
  assert.equal(now.value, 'alpha');
  assert.equal(now.term, la.term);

  assert.equal(await la.resign(), 0);
  const lb = await pb.done;
  assert.ok(lb instanceof Leadership);
  assert.equal(lb.value, 'beta');
  assert.ok(lb.term > la.term, `term ${lb.term} after ${la.term}`);
  const then = await watcher.leader('el:two');
  assert.equal(then.elected, true);
  assert.equal(then.value, 'beta');
  assert.equal(then.term, lb.term);
  await lb.resign();
}));

test('observe: the leader now, then each change in order of terms', () => withClients(4, async (obsClient, a, b, c) => {
  const rec = recorder(obsClient, 'el:obs');
  const observer = await obsClient.observe('el:obs', rec.onChange);
  assert.ok(observer instanceof Observer);
  assert.equal(observer.resource, 'el:obs');
  assert.equal(observer.state, 'observing');
  assert.deepEqual(observer.leader, { elected: false, term: 0n, value: '' });

  // A leader: elected, its term and value.
  const la = await a.campaign('el:obs', 'alpha');
  assert.deepEqual(await rec.next(), { elected: true, term: la.term, value: 'alpha' });
  assert.deepEqual(observer.leader, { elected: true, term: la.term, value: 'alpha' });
  // Resign with nobody waiting: elected false, the term stays the last one.
  await la.resign();
  assert.deepEqual(await rec.next(), { elected: false, term: la.term, value: '' });
  // A new leader: a higher term.
  const lb = await b.campaign('el:obs', 'beta');
  assert.ok(lb.term > la.term);
  assert.deepEqual(await rec.next(), { elected: true, term: lb.term, value: 'beta' });

  // Another client observing now starts from the leader now.
  const rec2 = recorder(c, 'el:obs');
  const observer2 = await c.observe('el:obs', rec2.onChange);
  assert.deepEqual(observer2.leader, { elected: true, term: lb.term, value: 'beta' });

  // A waiter takes over at the resign: the leaderless moment between may be skipped.
  const pc = track(c.campaign('el:obs', 'gamma', { wait: 30000 }));
  await waitFor('the waiting candidate', async () => (await a.stats()).waiters === 1);
  await lb.resign();
  const lc = await pc.done;
  assert.ok(lc.term > lb.term);
  for (const r of [rec, rec2]) {
    await waitFor('the new leader observed', async () => r.changes.length > 0 && r.changes.at(-1).term === lc.term);
    assert.deepEqual(r.changes.at(-1), { elected: true, term: lc.term, value: 'gamma' });
  }
  assert.deepEqual(observer.leader, { elected: true, term: lc.term, value: 'gamma' });

  // A second observer of the same election in the same client shares its subscription.
  const rec3 = [];
  const observer3 = await obsClient.observe('el:obs', (ch) => rec3.push(ch));
  assert.deepEqual(observer3.leader, { elected: true, term: lc.term, value: 'gamma' });
  await observer.stop();
  assert.equal(observer.state, 'stopped');
  const seen = rec.changes.length;
  await lc.resign();
  await waitFor('the third observer told', async () => rec3.length === 1);
  assert.deepEqual(rec3, [{ elected: false, term: lc.term, value: '' }]);
  await waitFor('the other client told', async () => rec2.changes.at(-1).elected === false);
  assert.equal(rec.changes.length, seen, 'a stopped observer was told');

  // Every observer saw terms in order; the daemon pushed them in order.
  assertInOrder(rec.changes, { elected: false, term: 0n }, 'observer');
  assertInOrder(rec2.changes, { elected: true, term: lb.term }, 'observer2');
  assertInOrder(rec.raw, { elected: false, term: 0n }, 'daemon pushes to obsClient');
  assertInOrder(rec2.raw, { elected: true, term: lb.term }, 'daemon pushes to c');

  // The last observer's stop ends the session's subscription: nothing is pushed any more.
  await observer3.stop();
  await observer2.stop();
  const rawBefore = rec.raw.length;
  const ld = await a.campaign('el:obs', 'delta');
  await sleep(500);
  assert.equal(rec.raw.length, rawBefore, `pushed after the subscription ended: ${fmt(rec.raw.slice(rawBefore))}`);
  await ld.resign();
  // stop() twice is fine.
  await observer.stop();
}));

test('observe an election that has a leader; observers end with their session', () => withClients(1, async (a) => {
  const la = await a.campaign('el:obs2', 'alpha');
  const o = await connect({ servers: [suite.env.addr], name: 'elect-observer' });
  try {
    const observer = await o.observe('el:obs2');
    assert.deepEqual(observer.leader, { elected: true, term: la.term, value: 'alpha' });
    const closed = once(observer, 'close');
    await o.close();
    const [why] = await closed;
    assert.equal(why, null);
    assert.equal(observer.state, 'closed');
    await observer.stop(); // nothing to stop: fine
    await assert.rejects(o.observe('el:obs2'), (e) => e.code === 'CLOSED');
    await assert.rejects(o.leader('el:obs2'), (e) => e.code === 'CLOSED');
  } finally {
    await o.close();
  }
  // A broken connection: the observer closes with the session's error.
  const o2 = await connect({ servers: [suite.env.addr], name: 'elect-observer-2' });
  const observer = await o2.observe('el:obs2');
  const closed = once(observer, 'close');
  o2._engine.link.sock.destroy();
  const [why] = await closed;
  assert.ok(why instanceof RlockError, String(why));
  assert.equal(why.code, 'CLOSED');
  await la.resign();
}));

test('the value: at most 1024 bytes of UTF-8 and no NUL, else a clear error; the daemon refuses one too long', () => withClients(1, async (c) => {
  let err = await failure(c.campaign('el:val', 'x'.repeat(1025)));
  assert.ok(err instanceof RangeError, String(err));
  assert.match(err.message, /1025 bytes.*at most 1024 bytes/);
  err = await failure(c.campaign('el:val', 'é'.repeat(513))); // 1026 bytes in 513 characters
  assert.ok(err instanceof RangeError, String(err));
  assert.match(err.message, /1026 bytes/);
  err = await failure(c.campaign('el:val', 'a\0b'));
  assert.ok(err instanceof RangeError, String(err));
  assert.match(err.message, /NUL/);
  await assert.rejects(c.campaign('el:val', 42), TypeError);
  await assert.rejects(c.campaign('el:val'), TypeError);
  await assert.rejects(c.lead('el:val', 'x'.repeat(1025), async () => assert.fail('ran')), RangeError);
  assert.equal((await c.stats()).heldLocks, 0);

  // The largest value is fine, and read back whole.
  const big = 'é'.repeat(512);
  const l = await c.campaign('el:val', big);
  assert.equal((await c.leader('el:val')).value, big);
  await l.resign();

  // The daemon's own check, past the client's: INVALID, nothing held.
  const raw = (body) => c._engine.call('acquire', { resource: 'el:val', owner: toU64(1), ...body }, 5000, 'raw acquire');
  err = await failure(raw({ campaign: true, value: 'x'.repeat(1025) }));
  assert.equal(err.code, 'INVALID');
  assert.match(err.message, /1024/);
  err = await failure(raw({ campaign: true, value: 'x', mode: 1 }));
  assert.equal(err.code, 'INVALID');
  err = await failure(raw({ campaign: true, value: 'x', limit: 3, permits: 1 }));
  assert.equal(err.code, 'INVALID');
  assert.equal((await c.stats()).heldLocks, 0);
  assert.deepEqual(await c.leader('el:val'), NOBODY);
}));

test('lead(): fn runs while leading and it resigns after; a loss aborts the signal', () => withClients(2, async (c, admin) => {
  const result = await c.lead('el:lead', 'me', { wait: 5000 }, async (signal, l) => {
    assert.ok(l instanceof Leadership);
    assert.equal(l.value, 'me');
    const now = await admin.leader('el:lead');
    assert.equal(now.value, 'me');
    assert.equal(now.term, l.term);
    signal.throwIfAborted();
    return l.term;
  });
  assert.equal(typeof result, 'bigint');
  assert.deepEqual(await admin.leader('el:lead'), NOBODY);
  // fn throws: resigned all the same.
  assert.equal((await failure(c.lead('el:lead', 'me', async () => { throw new Error('boom'); }))).message, 'boom');
  assert.deepEqual(await admin.leader('el:lead'), NOBODY);

  // Lost (an operator takes the lock away): the signal aborts, lead rejects with the reason.
  const clientLost = once(c, 'lost');
  let lost = null;
  const err = await failure(c.lead('el:lead', 'me', async (signal, l) => {
    l.on('lost', (e) => { lost = e; });
    await admin.forceRelease('el:lead');
    if (!signal.aborted) await once(signal, 'abort');
    return 'finished';
  }));
  assert.equal(err.code, 'LOCK_LOST');
  assert.equal(err.lostReason, 'forced');
  assert.equal(err.resource, 'el:lead');
  const [lock] = await clientLost;
  assert.ok(lock instanceof Leadership);
  await waitFor('the lost event', async () => lost !== null);
  assert.deepEqual(await admin.leader('el:lead'), NOBODY);
}));

test('a leadership lost in Redis (its key deleted) is lost like any lock (MISSING); leader() and observers say nobody leads', () => withClients(2, async (c, watcher) => {
  const rec = recorder(watcher, 'el:del');
  const observer = await watcher.observe('el:del', rec.onChange);
  const l = await c.campaign('el:del', 'doomed', { ttl: 1500 });
  assert.deepEqual(await rec.next(), { elected: true, term: l.term, value: 'doomed' });
  const lost = once(l, 'lost');
  await suite.env.redis.command('DEL', suite.env.key('el:del'));
  // The record is read through the key: nobody leads from the DEL on.
  assert.deepEqual(await watcher.leader('el:del'), NOBODY);
  const [err] = await lost;
  assert.equal(err.code, 'LOCK_LOST');
  assert.equal(err.lostReason, 'missing');
  assert.equal(l.state, 'lost');
  // No notice for a DEL by somebody else: the observer is told by the daemon's
  // read at the end of the leader's lease.
  assert.deepEqual(await rec.next(15000), { elected: false, term: l.term, value: '' });
  // The next leader, in a higher term: it waits out what was left of the lost
  // leader's lease (the daemon keeps the key as a tombstone until then).
  const l2 = await c.campaign('el:del', 'next', { wait: 10000 });
  assert.ok(l2.term > l.term);
  assert.deepEqual(await rec.next(), { elected: true, term: l2.term, value: 'next' });
  await l2.resign();
  await observer.stop();
}));

test('a leader whose process is killed (SIGKILL): a waiting candidate leads, terms strictly increasing', () => withClients(2, async (me, watcher) => {
  const election = 'el:kill';
  const rec = recorder(watcher, election);
  const observer = await watcher.observe(election, rec.onChange);
  const children = new Map(); // value -> {child, lines, exited}
  const start = (value) => {
    const child = spawn(process.execPath, [path.join(__dirname, 'helpers', 'candidate.js'), suite.env.addr, election, value],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    const entry = { child, lines: [], err: '' };
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const parts = buf.split('\n');
      buf = parts.pop();
      entry.lines.push(...parts);
    });
    child.stderr.on('data', (d) => { entry.err += d; });
    entry.exited = once(child, 'exit');
    children.set(value, entry);
    return entry;
  };
  try {
    // Three candidates in their own processes, one after another in the queue.
    for (const v of ['p1', 'p2', 'p3']) {
      const e = start(v);
      // In line: the first one leads, the others wait (FIFO: they lead in this order).
      await waitFor(`${v} leading or waiting`, async () => (await watcher.leader(election)).elected
        && (await watcher.stats()).waiters === children.size - 1);
    }
    const pme = track(me.campaign(election, 'parent', { wait: 60000 }));
    await waitFor('four candidates: one leads, three wait', async () => (await watcher.stats()).waiters === 3);

    const terms = [];
    const leaders = [];
    for (let round = 0; round < 3; round++) {
      const now = await watcher.leader(election);
      assert.equal(now.elected, true);
      const e = children.get(now.value);
      assert.ok(e, `the leader is ${now.value}`);
      // Redis may show the grant before the candidate has read its answer.
      await waitFor(`${now.value} told it leads`, async () => e.lines.some((x) => x.startsWith('leader ')));
      const printed = e.lines.find((x) => x.startsWith('leader '));
      assert.equal(BigInt(printed.slice(7)), now.term);
      terms.push(now.term);
      leaders.push(now.value);
      e.child.kill('SIGKILL');
      await e.exited;
      // The daemon ends its session at the connection's end and the next in line is granted.
      await waitFor('the next leader', async () => {
        const next = await watcher.leader(election);
        return next.elected && next.term > now.term;
      }, 15000);
    }
    const mine = await pme.done;
    assert.equal(mine.value, 'parent');
    terms.push(mine.term);
    leaders.push('parent');
    assert.deepEqual(leaders, ['p1', 'p2', 'p3', 'parent']);
    for (let i = 1; i < terms.length; i++) assert.ok(terms[i] > terms[i - 1], `terms ${terms.join(', ')}`);
    const now = await watcher.leader(election);
    assert.deepEqual([now.elected, now.term, now.value], [true, mine.term, 'parent']);

    // The observer saw the leaders in that order (leaderless moments may be skipped).
    await waitFor('the observer at the last leader', async () => observer.leader.term === mine.term);
    assertInOrder(rec.changes, { elected: false, term: 0n }, 'observer');
    assertInOrder(rec.raw, { elected: false, term: 0n }, 'daemon pushes');
    const elected = rec.changes.filter((ch) => ch.elected);
    assert.deepEqual(elected.map((ch) => ch.term), terms);
    assert.deepEqual(elected.map((ch) => ch.value), leaders);
    await mine.resign();
    await observer.stop();
  } finally {
    for (const e of children.values()) {
      if (e.child.exitCode === null && e.child.signalCode === null) {
        e.child.kill('SIGKILL');
        await e.exited;
      }
    }
  }
}));

test('the README example: candidates take turns leading', async () => {
  const readme = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8');
  const at = readme.indexOf('<!-- example: leader -->');
  assert.ok(at >= 0, 'no example leader in README.md');
  const src = /```js\n([\s\S]*?)```/.exec(readme.slice(at))[1];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlnode-leader.'));
  const watcher = await connect({ servers: [suite.env.addr], name: 'elect-readme' });
  try {
    fs.mkdirSync(path.join(dir, 'node_modules'));
    fs.symlinkSync(PKG, path.join(dir, 'node_modules', 'rlockd'), 'dir');
    fs.writeFileSync(path.join(dir, 'example.js'), src);
    const rec = recorder(watcher, 'scheduler');
    const observer = await watcher.observe('scheduler', rec.onChange);
    const runs = ['n1', 'n2', 'n3'].map((name) => {
      const child = spawn(process.execPath, ['example.js', name], {
        cwd: dir, env: { ...process.env, RLOCKD_SERVERS: suite.env.addr, LEAD_MS: '700' }, stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let errOut = '';
      child.stdout.on('data', (d) => { out += d; });
      child.stderr.on('data', (d) => { errOut += d; });
      const killer = setTimeout(() => child.kill('SIGKILL'), 60000);
      return new Promise((resolve) => child.on('close', (rc) => {
        clearTimeout(killer);
        resolve({ name, rc, out, errOut });
      }));
    });
    const terms = new Map();
    for (const r of await Promise.all(runs)) {
      assert.equal(r.rc, 0, `${r.name}: ${r.errOut}`);
      const m = new RegExp(`^${r.name}: leading in term (\\d+)\n${r.name}: resigned\n$`).exec(r.out);
      assert.ok(m, `${r.name} printed ${JSON.stringify(r.out)}`);
      terms.set(r.name, BigInt(m[1]));
    }
    await waitFor('the last resign observed', async () => rec.changes.length > 0 && !rec.changes.at(-1).elected);
    assertInOrder(rec.changes, { elected: false, term: 0n }, 'observer');
    const elected = rec.changes.filter((ch) => ch.elected);
    assert.deepEqual(elected.map((ch) => [ch.value, ch.term]),
      [...terms].sort((x, y) => (x[1] < y[1] ? -1 : 1)));
    await observer.stop();
    assert.deepEqual(await watcher.leader('scheduler'), NOBODY);
  } finally {
    await watcher.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a session move keeps the leadership (same term) and the observation', async () => {
  const menv = await startEnv({
    extraIni: (e) => `[session]\nresume_key_file = ${path.join(e.dir, 'resume.key')}\n`,
  });
  const client = await connect({ servers: [menv.addr], name: 'elect-move', sessionTimeout: 20000 });
  const others = [];
  try {
    const l = await client.campaign('el:mv', 'mover', { ttl: 3000 });
    let lost = null;
    l.on('lost', (err) => { lost = err; });
    const rec = recorder(client, 'el:mv:other');
    const observer = await client.observe('el:mv:other', rec.onChange);
    const resumed = once(client, 'resumed');
    await menv.stopRlockd('SIGTERM');
    await menv.startRlockd();
    await resumed;
    // Past the lease's ttl: only renewals by the new daemon keep it.
    await sleep(4000);
    assert.equal(lost, null);
    assert.equal(l.state, 'held');
    const other = await connect({ servers: [menv.addr], name: 'elect-move-2' });
    others.push(other);
    const now = await other.leader('el:mv');
    assert.deepEqual([now.elected, now.term, now.value], [true, l.term, 'mover']);
    assert.equal((await failure(other.campaign('el:mv', 'usurper'))).code, 'NOT_ACQUIRED');

    // The observation was taken along: a change after the move reaches the observer.
    assert.equal(observer.state, 'observing');
    const lo = await other.campaign('el:mv:other', 'after-move');
    assert.deepEqual(await rec.next(), { elected: true, term: lo.term, value: 'after-move' });
    await lo.resign();
    assert.deepEqual(await rec.next(), { elected: false, term: lo.term, value: '' });
    await observer.stop();

    assert.equal(await l.resign(), 0);
    assert.deepEqual(await other.leader('el:mv'), NOBODY);
  } finally {
    for (const c of others) await c.close();
    await client.close();
    await menv.stop();
  }
});

/**
 * Records how the daemon answers the Observes of `client`'s subscription to
 * `resource` from now on: 'OK', or the code of the error.
 */
function refusals(client, resource) {
  const w = client._watches.get(resource);
  const seen = [];
  const observe = w.observe.bind(w);
  w.observe = async (...args) => {
    try {
      const r = await observe(...args);
      seen.push('OK');
      return r;
    } catch (e) {
      seen.push(e.code);
      throw e;
    }
  };
  return seen;
}

test('after a move, an Observe refused while Redis is out of reach is sent again until it is observed', async () => {
  const menv = await startEnv({
    extraIni: (e) => `[session]\nresume_key_file = ${path.join(e.dir, 'resume.key')}\n`,
  });
  const client = await connect({ servers: [menv.addr], name: 'elect-unavailable', sessionTimeout: 20000 });
  const others = [];
  try {
    const rec = recorder(client, 'el:unav');
    const observer = await client.observe('el:unav', rec.onChange);
    const refused = refusals(client, 'el:unav');
    // The daemon restarts while Redis is stopped: it resumes the session but
    // answers its Observe UNAVAILABLE.
    process.kill(menv.redisPid, 'SIGSTOP');
    const resumed = once(client, 'resumed');
    await menv.stopRlockd('SIGKILL');
    menv.rlockdPid = menv.spawnLogged(RLOCKD_BIN, ['-c', menv.confPath], 'rlockd.log').pid;
    await resumed;
    await waitFor('the Observe refused after the move', () => refused.includes('UNAVAILABLE'));
    await sleep(300);
    process.kill(menv.redisPid, 'SIGCONT');
    assert.equal(observer.state, 'observing');

    const other = await connect({ servers: [menv.addr], name: 'elect-unavailable-2' });
    others.push(other);
    let l;
    await waitFor('a campaign once Redis is back', async () => {
      l = await other.campaign('el:unav', 'back');
      return true;
    });
    assert.deepEqual(await rec.next(), { elected: true, term: l.term, value: 'back' });
    await l.resign();
    assert.deepEqual(await rec.next(), { elected: false, term: l.term, value: '' });
    await observer.stop();
  } finally {
    for (const c of others) await c.close();
    await client.close();
    await menv.stop();
  }
});

/**
 * An env whose daemon has a resume key, and `restart(session)`: the daemon
 * stopped (SIGTERM: sessions are told to move) and started again with
 * `session` more in its [session] section.
 */
async function restartableEnv() {
  let session = '';
  const menv = await startEnv({
    extraIni: (e) => `[session]\nresume_key_file = ${path.join(e.dir, 'resume.key')}\n${session}`,
  });
  menv.restart = async (more) => {
    session = more;
    menv.writeConfig();
    await menv.stopRlockd('SIGTERM');
    await menv.startRlockd();
  };
  return menv;
}

test('after a move, an Observe refused LIMIT_EXCEEDED is sent again until the daemon has room', async () => {
  const menv = await restartableEnv();
  const client = await connect({ servers: [menv.addr], name: 'elect-limit', sessionTimeout: 20000 });
  const others = [];
  try {
    const rec = recorder(client, 'el:lim:2');
    const o1 = await client.observe('el:lim:1');
    const o2 = await client.observe('el:lim:2', rec.onChange);
    const refused = refusals(client, 'el:lim:2');
    // The daemon comes back letting a session observe one election: after the
    // resume el:lim:1 (subscribed again first) is observed, el:lim:2 refused.
    const resumed = once(client, 'resumed');
    await menv.restart('max_locks = 1\n');
    await resumed;
    await waitFor('the Observe refused after the move', () => refused.includes('LIMIT_EXCEEDED'));
    assert.equal(o2.state, 'observing');
    await o1.stop(); // room for el:lim:2
    const other = await connect({ servers: [menv.addr], name: 'elect-limit-2' });
    others.push(other);
    await waitFor('el:lim:2 observed again', () => refused.includes('OK'));
    const l = await other.campaign('el:lim:2', 'room');
    assert.deepEqual(await rec.next(), { elected: true, term: l.term, value: 'room' });
    assert.equal(o2.state, 'observing');
    await l.resign();
    await o2.stop();
  } finally {
    for (const c of others) await c.close();
    await client.close();
    await menv.stop();
  }
});

test('after a move, an Observe refused LIMIT_EXCEEDED for 5 s closes its observers; observe() works again once there is room', async () => {
  const menv = await restartableEnv();
  const client = await connect({ servers: [menv.addr], name: 'elect-limit-gone', sessionTimeout: 20000 });
  try {
    const o1 = await client.observe('el:full:1');
    const o2 = await client.observe('el:full:2');
    const refused = refusals(client, 'el:full:2');
    const closed = once(o2, 'close');
    const resumed = once(client, 'resumed');
    await menv.restart('max_locks = 1\n');
    await resumed;
    await waitFor('the Observe refused after the move', () => refused.includes('LIMIT_EXCEEDED'));
    const first = Date.now();
    const [err] = await closed;
    assert.ok(Date.now() - first > 3000, `closed after ${Date.now() - first} ms, not after 5 s of tries`);
    assert.equal(err.code, 'LIMIT_EXCEEDED');
    assert.equal(o2.state, 'closed');
    assert.equal(o1.state, 'observing');
    assert.equal((await failure(client.observe('el:full:2'))).code, 'LIMIT_EXCEEDED');
    await o1.stop();
    const again = await client.observe('el:full:2');
    assert.equal(again.state, 'observing');
    await again.stop();
  } finally {
    await client.close();
    await menv.stop();
  }
});

test('bad arguments', () => withClients(1, async (c) => {
  await assert.rejects(c.campaign('', 'v'), TypeError);
  await assert.rejects(c.campaign(7, 'v'), TypeError);
  for (const opts of [{ shared: true }, { limit: 3 }, { limit: 3, permits: 1 }, { permits: 1 }]) {
    await assert.rejects(c.campaign('el:bad', 'v', opts), TypeError, JSON.stringify(opts));
    await assert.rejects(c.lead('el:bad', 'v', opts, async () => assert.fail('ran')), TypeError, JSON.stringify(opts));
  }
  await assert.rejects(c.campaign('el:bad', 'v', { ttl: -1 }), RangeError);
  await assert.rejects(c.lead('el:bad', 'v'), TypeError);
  await assert.rejects(c.leader(''), TypeError);
  await assert.rejects(c.observe(''), TypeError);
  await assert.rejects(c.observe('el:bad', {}, 'not a function'), TypeError);
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(c.campaign('el:bad', 'v', { signal: ac.signal }), (e) => e.name === 'AbortError' && /campaign el:bad/.test(e.message));
  // shared: false is an exclusive campaign, as without it.
  const l = await c.campaign('el:bad', 'v', { shared: false });
  await l.resign();
  assert.equal((await c.stats()).heldLocks, 0);
}));
