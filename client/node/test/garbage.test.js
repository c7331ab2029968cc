// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// A daemon that sends what cannot be read: the session ends cleanly — every
// lock lost, every pending call rejected with PROTOCOL, the socket closed —
// and no exception escapes.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { once } = require('node:events');
const { startStub, reply } = require('./helpers/stub');
const { connect } = require('..');

const escaped = [];
const onEscape = (e) => escaped.push(e);
process.on('uncaughtException', onEscape);
process.on('unhandledRejection', onEscape);

let dir;
test.before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlnode-stub.')); });
test.after(() => {
  fs.rmSync(dir, { recursive: true, force: true });
  process.removeListener('uncaughtException', onEscape);
  process.removeListener('unhandledRejection', onEscape);
});

const cases = [
  {
    name: 'a frame announcing more than 16 MiB',
    bytes: () => Buffer.from([0x01, 0x00, 0x00, 0x01]),
    message: /announced a frame of 16777217 bytes/,
  },
  {
    name: 'a frame that does not decode',
    bytes: () => Buffer.from([0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff]),
    message: /undecodable frame/,
  },
  {
    name: 'a Ping answered with the wrong reply body',
    bytes: (id) => reply({ response: { id, release: { hold_count: 0 } } }),
    message: /wrong reply body/,
  },
];

for (const [i, c] of cases.entries()) {
  test(`${c.name} ends the session cleanly`, async () => {
    const sockPath = path.join(dir, `stub${i}.sock`);
    const { server, closedByClient } = await startStub(sockPath, c.bytes);
    try {
      const client = await connect({ servers: [`unix:${sockPath}`], name: 'garbage' });
      const closed = once(client, 'close');
      const lostEvents = [];
      client.on('lost', (lock, err) => lostEvents.push(err));
      const lock = await client.acquire('granted');
      assert.equal(lock.fence, 42n);
      assert.equal(lock.state, 'held');
      const waiting = client.acquire('never-answered', { wait: 60000 });
      const pingErr = await client.ping().then(() => null, (e) => e);

      assert.ok(pingErr, 'the ping resolved');
      assert.equal(pingErr.code, 'PROTOCOL');
      const waitErr = await waiting.then(() => null, (e) => e);
      assert.equal(waitErr.code, 'PROTOCOL');
      assert.match(waitErr.message, c.message);
      assert.equal(lock.state, 'lost');
      assert.equal(lock.lostReason, 'session');
      assert.equal(lostEvents.length, 1);
      const [closeErr] = await closed;
      assert.equal(closeErr.code, 'PROTOCOL');
      assert.match(closeErr.message, c.message);
      assert.equal(client.closed, true);
      await closedByClient; // the client closed its socket
      const after = await client.acquire('later').then(() => null, (e) => e);
      assert.equal(after.code, 'CLOSED');
      await client.close(); // closing an ended session is fine
      assert.deepEqual(escaped, []);
    } finally {
      server.close();
    }
  });
}

test('a grant lost in the same read: using() does not run its function', async () => {
  const sockPath = path.join(dir, 'stub-lost.sock');
  const { server } = await startStub(sockPath, () => Buffer.alloc(0));
  try {
    const client = await connect({ servers: [`unix:${sockPath}`] });
    let ran = false;
    const err = await client.using('lost-at-once', () => { ran = true; }).then(() => null, (e) => e);
    assert.equal(ran, false);
    assert.equal(err.code, 'LOCK_LOST');
    assert.equal(err.lostReason, 'missing');
    assert.equal(client.closed, false);
    client._engine.link.sock.destroy(); // the stub knows no Goodbye
    await client.close();
    assert.deepEqual(escaped, []);
  } finally {
    server.close();
  }
});
