// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// What the daemon accepts from an encoder (docs/protocol.md §4.6): every
// request kind with every field written at its default, and every request
// kind this client sends, as it sends it.

const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const path = require('node:path');
const { startEnv } = require('./helpers/env');
const { encodeExplicit } = require('./helpers/explicit');
const { startTap } = require('./helpers/tap');
const { FrameReader, encodeFrame } = require('../lib/framing');
const { Request, decodeServerMessage, u64Number } = require('../lib/codec');
const { statusName } = require('../lib/errors');
const { connect } = require('..');

let env;
test.before(async () => { env = await startEnv(); });
test.after(async () => { if (env) await env.stop(); });

/** A raw connection: send(request) resolves with its Response. */
async function rawSession(addrPath) {
  const sock = net.connect({ path: addrPath });
  await new Promise((resolve, reject) => {
    sock.once('connect', resolve);
    sock.once('error', reject);
  });
  const reader = new FrameReader();
  const waiting = new Map();
  sock.on('data', (chunk) => {
    for (const f of reader.push(chunk)) {
      const m = decodeServerMessage(f);
      if (!m.response) continue;
      const w = waiting.get(u64Number(m.response.id));
      if (w) w(m.response);
    }
  });
  return {
    sock,
    send(bytes, id) {
      return new Promise((resolve) => {
        waiting.set(id, resolve);
        sock.write(encodeFrame(bytes));
      });
    },
  };
}

test('every request kind, every field written at its default, is answered as it should be', async () => {
  const raw = await rawSession(env.rlockdSock);
  const steps = [
    // [request, the status it must get]
    [{ hello: {} }, 'OK'],
    [{ acquire: { resource: 'defaults:a' } }, 'OK'],
    [{ extend: { resource: 'defaults:a' } }, 'OK'],
    [{ ping: {} }, 'OK'],
    [{ stats: {} }, 'OK'],
    [{ cancel: {} }, 'OK'],
    [{ list_sessions: {} }, 'OK'],
    [{ list_locks: {} }, 'OK'],
    [{ server_info: {} }, 'OK'],
    [{ force_release: { resource: 'defaults:none' } }, 'NOT_HELD'],
    [{ kill_session: { session_id: '00000000-0000-4000-8000-000000000000' } }, 'NOT_FOUND'],
    [{ leader: { resource: 'defaults:a' } }, 'OK'],
    [{ observe: { resource: 'defaults:a' } }, 'OK'],
    [{ observe: { resource: 'defaults:a', stop: true } }, 'OK'],
    [{ release: { resource: 'defaults:a' } }, 'OK'],
    [{ goodbye: {} }, 'OK'],
  ];
  try {
    let id = 0;
    for (const [body, want] of steps) {
      id++;
      const req = { id, ...body };
      const bytes = encodeExplicit(req);
      const kind = Object.keys(body)[0];
      const canonical = Request.encode(req).finish();
      // The defaults really are on the wire, where the body has fields left at them.
      const fields = Request.fields[kind].resolvedType.fieldsArray;
      if (fields.some((f) => body[kind][f.name] === undefined)) {
        assert.ok(bytes.length > canonical.length, `${kind}: no default written`);
      }
      const resp = await raw.send(bytes, id);
      assert.equal(statusName(resp.status), want, `${kind}: ${resp.message}`);
      if (kind === 'acquire') assert.equal(resp.acquire.hold_count, 1);
      if (kind === 'release') assert.equal(resp.release.hold_count, 0);
      if (kind === 'cancel') assert.equal(resp.cancel.found, false);
      if (kind === 'list_locks') assert.equal(resp.list_locks.locks.length, 1);
      // A plain lock is nobody's lead.
      if (kind === 'leader' || kind === 'observe') assert.equal(resp.leader.elected, false);
    }
  } finally {
    raw.sock.destroy();
  }
});

test('every request kind this client sends is accepted', async () => {
  const tapPath = path.join(env.dir, 'tap.sock');
  const { server, frames } = await startTap(tapPath, env.rlockdSock);
  const holder = await connect({ servers: [env.addr] });
  try {
    const client = await connect({ servers: [`unix:${tapPath}`], name: 'defaults', sessionTimeout: 0, token: '' });
    const lock = await client.acquire('defaults:b', {
      ttl: 0, wait: 0, maxHold: 0, lockDelay: 0, watchdog: true, reentry: true,
    });
    await lock.extend(0);
    await client.ping();
    await client.stats();
    await client.serverInfo();
    assert.ok((await client.sessions()).length >= 2);
    assert.equal((await client.locks({ prefix: '', sessionId: '' })).length, 1);
    const notHeld = await client.forceRelease('defaults:none').then(() => null, (e) => e);
    assert.equal(notHeld.code, 'NOT_HELD');
    const notFound = await client.killSession('00000000-0000-4000-8000-000000000000').then(() => null, (e) => e);
    assert.equal(notFound.code, 'NOT_FOUND');
    // A Cancel: withdraw an acquire that waits behind another session.
    const held = await holder.acquire('defaults:c');
    const ac = new AbortController();
    const waiting = client.acquire('defaults:c', { wait: 60000, signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    assert.equal((await waiting.then(() => null, (e) => e)).code, 'CANCELLED');
    await held.release();
    assert.equal(await lock.release(), 0);
    // Elections: a campaign (an Acquire), Leader, Observe and its stop.
    const leadership = await client.campaign('defaults:e', '', { wait: 0 });
    assert.equal((await client.leader('defaults:e')).elected, true);
    const observer = await client.observe('defaults:e');
    assert.equal(observer.leader.term, leadership.term);
    await observer.stop();
    assert.equal(await leadership.resign(), 0);
    await client.close();

    const kinds = new Set(frames.map((f) => {
      const r = Request.decode(f);
      return r.body;
    }));
    assert.deepEqual([...kinds].sort(), [
      'acquire', 'cancel', 'extend', 'force_release', 'goodbye', 'hello', 'kill_session',
      'leader', 'list_locks', 'list_sessions', 'observe', 'ping', 'release', 'server_info', 'stats',
    ]);
  } finally {
    await holder.close();
    server.close();
  }
});
