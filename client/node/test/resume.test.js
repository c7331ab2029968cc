// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Moving a session (docs/protocol.md §10): with a resume key the daemon gives
// each session a secret; when it restarts (SIGTERM handover, or a kill -9),
// the client resumes the session on it once it is back and adopts its locks,
// with the same session id, token and fence.

const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const path = require('node:path');
const { once } = require('node:events');
const { startEnv, waitFor } = require('./helpers/env');
const { encodeExplicit } = require('./helpers/explicit');
const { FrameReader, encodeFrame } = require('../lib/framing');
const { decodeServerMessage, u64Number } = require('../lib/codec');
const { statusName } = require('../lib/errors');
const { connect } = require('..');

const BOUND_MS = 30000;

let env;
test.before(async () => {
  env = await startEnv({
    extraIni: (e) => `[session]\nresume_key_file = ${path.join(e.dir, 'resume.key')}\n`,
  });
});
test.after(async () => { if (env) await env.stop(); });

function within(promise, ms, what) {
  let t;
  return Promise.race([promise, new Promise((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  })]).finally(() => clearTimeout(t));
}

async function restartCheck(signal) {
  const client = await connect({ servers: [env.addr], name: `move-${signal}`, sessionTimeout: 20000 });
  try {
    const sessionId = client.sessionId;
    const lock = await client.acquire('move:a', { ttl: 15000 });
    const other = await client.acquire('move:b', { ttl: 15000 });
    const tokenBefore = await env.redis.command('GET', env.key('move:a'));
    assert.equal(tokenBefore, lock.token);
    // An acquire waiting behind another owner when the daemon goes.
    const waiting = client.acquire('move:b', { wait: 60000 }).then(() => null, (e) => e);
    // A using() whose function returns as soon as its signal aborts (the
    // move makes every lock uncertain): its release waits for the resume.
    let started;
    const running = new Promise((resolve) => { started = resolve; });
    const inUsing = client.using('move:c', { ttl: 15000 }, (signal) => new Promise((resolve) => {
      started();
      signal.addEventListener('abort', () => resolve('returned during the move'), { once: true });
    })).then(() => null, (e) => e);
    await running;
    const moving = once(client, 'moving');
    const resumed = once(client, 'resumed');
    const uncertain = once(lock, 'uncertain');
    let lostEvents = 0;
    client.on('lost', () => lostEvents++);

    await env.stopRlockd(signal);
    await within(moving, BOUND_MS, 'moving event');
    await within(uncertain, BOUND_MS, 'uncertain event');
    assert.equal(client.moving, true);
    assert.equal(lock.state, 'uncertain');
    const waitErr = await waiting;
    assert.equal(waitErr.code, 'UNAVAILABLE');
    const pingErr = await client.ping().then(() => null, (e) => e);
    assert.equal(pingErr.code, 'UNAVAILABLE');
    assert.equal(pingErr.retryAfter, 100);

    await env.startRlockd();
    await within(resumed, BOUND_MS, 'resumed event');
    assert.equal(client.moving, false);
    assert.equal(client.resumes, 1);
    assert.equal(client.sessionId, sessionId);
    assert.equal(lostEvents, 0);
    for (const l of [lock, other]) assert.equal(l.state, 'held');
    // The application's token and fence stay; the key's token was rotated.
    assert.equal(lock.token, tokenBefore);
    const tokenAfter = await env.redis.command('GET', env.key('move:a'));
    assert.ok(tokenAfter && tokenAfter !== tokenBefore, `key token ${tokenAfter}`);
    const listed = await client.locks({ sessionId, prefix: 'move:' });
    assert.ok(listed.length >= 2);
    assert.equal(listed.find((l) => l.resource === 'move:a').fence, lock.fence);
    const usingErr = await within(inUsing, BOUND_MS, 'using to settle');
    assert.equal(usingErr.code, 'UNCERTAIN');
    assert.equal(await env.redis.command('EXISTS', env.key('move:c')), 0);
    const info = await client.serverInfo();
    assert.equal(info.sessionsResumed, 1);
    assert.equal(info.locksAdopted, 3);
    // The session works as before: releases, pings, acquires.
    await client.ping();
    assert.equal(await lock.release(), 0);
    assert.equal(await env.redis.command('EXISTS', env.key('move:a')), 0);
    const again = await client.acquire('move:a');
    assert.ok(again.fence > lock.fence);
    await again.release();
    await other.release();
    const st = await client.stats();
    assert.equal(st.heldLocks, 0);
    assert.equal(st.waiters, 0);
  } finally {
    await client.close();
    if (!env.rlockdRunning()) await env.startRlockd();
  }
  await waitFor('no lock key left', async () => (await env.lockKeys()).length === 0, BOUND_MS);
}

test('SIGTERM (handover): the session resumes on the restarted daemon with its locks', () => restartCheck('SIGTERM'));

test('kill -9 of the daemon: the session resumes once it is back, with its locks', () => restartCheck('SIGKILL'));

test('Resume and Adopt with every field written at its default are accepted', async () => {
  // A session to take over: its client must not move by itself.
  const client = await connect({ servers: [env.addr], name: 'explicit', resume: false });
  const closed = once(client, 'close');
  const lock = await client.acquire('move:explicit', { ttl: 15000 });
  const g = lock._grant;
  const secret = client._engine.sessionSecret;
  assert.match(secret, /^[0-9a-f]{32}$/);

  const sock = net.connect({ path: env.rlockdSock });
  await once(sock, 'connect');
  const reader = new FrameReader();
  const answers = new Map();
  const waiters = new Map();
  sock.on('data', (chunk) => {
    for (const f of reader.push(chunk)) {
      const m = decodeServerMessage(f);
      if (!m.response) continue;
      const id = u64Number(m.response.id);
      answers.set(id, m.response);
      if (waiters.has(id)) waiters.get(id)(m.response);
    }
  });
  const send = (req) => new Promise((resolve) => {
    waiters.set(req.id, resolve);
    sock.write(encodeFrame(encodeExplicit(req)));
  });
  try {
    const resume = await send({
      id: 1, resume: { session_id: client.sessionId, session_secret: secret },
    });
    assert.equal(statusName(resume.status), 'OK', resume.message);
    assert.equal(resume.hello.resumed, true);
    assert.equal(resume.hello.session_id, client.sessionId);
    // The daemon closed the client's own connection: that client's session is over.
    await within(closed, BOUND_MS, 'the old connection to close');
    const adopt = await send({
      id: 2,
      adopt: {
        resource: g.resource, token: g.wire, fence: g.fence.toString(), ttl_ms: g.ttl,
        owner: g.owner.toString(), hold_count: 0, seal: g.seal,
      },
    });
    assert.equal(statusName(adopt.status), 'OK', adopt.message);
    assert.equal(await env.redis.command('GET', env.key('move:explicit')), adopt.adopt.token);
    const release = await send({ id: 3, release: { resource: g.resource, token: adopt.adopt.token } });
    assert.equal(statusName(release.status), 'OK', release.message);
    assert.equal(release.release.hold_count, 0);
    const byId = await send({ id: 4, release: { resource: 'move:never', acquire_id: 2 } });
    assert.equal(statusName(byId.status), 'OK', byId.message);
    const bye = await send({ id: 5, goodbye: {} });
    assert.equal(statusName(bye.status), 'OK');
  } finally {
    sock.destroy();
    await client.close();
  }
});
