// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The pure parts: framing, addresses, and the codec against the bytes of
// docs/protocol.md §7.

const test = require('node:test');
const assert = require('node:assert/strict');
const { FrameReader, FrameError, encodeFrame } = require('../lib/framing');
const { parseAddress, parseServers, spreadOrder } = require('../lib/address');
const {
  encodeRequest, decodeServerMessage, toU64, fromU64,
} = require('../lib/codec');

const hex = (s) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

test('frames: split anywhere, joined in order; empty frames; the 16 MiB limit', () => {
  const frames = [Buffer.from('abc'), Buffer.alloc(0), Buffer.alloc(70000, 7)];
  const stream = Buffer.concat(frames.map(encodeFrame));
  for (const step of [1, 3, 4, 5, 1000, stream.length]) {
    const r = new FrameReader();
    const got = [];
    for (let i = 0; i < stream.length; i += step) got.push(...r.push(stream.subarray(i, i + step)));
    assert.deepEqual(got.map((b) => Buffer.from(b)), frames, `step ${step}`);
  }
  const r = new FrameReader();
  assert.deepEqual(r.push(hex('01 00 00 00')).length, 0); // exactly 16 MiB announced: fine
  assert.throws(() => new FrameReader().push(hex('01 00 00 01')), FrameError);
});

test('addresses', () => {
  assert.deepEqual(parseAddress('10.0.0.1:7483'), { text: '10.0.0.1:7483', tls: false, host: '10.0.0.1', port: 7483 });
  assert.deepEqual(parseAddress('[::1]:7483'), { text: '[::1]:7483', tls: false, host: '::1', port: 7483 });
  assert.deepEqual(parseAddress('unix:/run/rlockd.sock'), { text: 'unix:/run/rlockd.sock', tls: false, path: '/run/rlockd.sock' });
  assert.deepEqual(parseAddress('tls://db.example:7484'), { text: 'tls://db.example:7484', tls: true, host: 'db.example', port: 7484 });
  assert.deepEqual(parseAddress('tls://unix:/s'), { text: 'tls://unix:/s', tls: true, path: '/s' });
  for (const bad of ['', 'host', 'host:0', 'host:65536', 'host:http', '::1:80', 'unix:', 'tls://']) {
    assert.throws(() => parseAddress(bad), TypeError, bad);
  }
  assert.equal(parseServers('a:1, b:2').length, 2);
  const addrs = parseServers(['a:1', 'b:2', 'c:3']);
  // Every start is possible, and each order holds every address once, wrapping around.
  const starts = new Set();
  for (const x of [0, 0.34, 0.67, 0.99]) {
    const o = spreadOrder(addrs, () => x).map((a) => a.host);
    starts.add(o[0]);
    assert.deepEqual([...o].sort(), ['a', 'b', 'c']);
    assert.equal(o.join(''), 'abcabc'.substr('abc'.indexOf(o[0]), 3));
  }
  assert.equal(starts.size, 3);
});

test('codec: the Hello and Acquire of docs/protocol.md §7, byte for byte', () => {
  assert.deepEqual(Buffer.from(encodeFrame(encodeRequest({ id: 1, hello: { client_name: 'demo', protocol_version: 1 } }))),
    hex('00 00 00 0c 08 01 12 08 0a 04 64 65 6d 6f 10 01'));
  assert.deepEqual(Buffer.from(encodeFrame(encodeRequest({
    id: 4, acquire: { resource: 'orders/42', ttl_ms: 30000, wait_ms: 5000, owner: toU64(1001) },
  }))), hex('00 00 00 19 08 04 1a 15 0a 09 6f 72 64 65 72 73 2f 34 32 10 b0 ea 01 18 88 27 28 e9 07'));
  assert.deepEqual(Buffer.from(encodeRequest({ id: 3, ping: {} })), hex('08 03 32 00'));
});

test('codec: AcquireReply and LockLost of §7 decode, fences as bigint', () => {
  const reply = decodeServerMessage(hex(`0a 3f 08 02 5a 3b 0a 24 39 66 38 63
    32 64 34 65 2d 36 61 31 62 2d 34 63 33 64 2d 38 65 37 66 2d 30 61 31 62 32 63 33 64 34 65 35 66
    10 c0 fc cb fc ea 98 91 03 18 b0 ea 01 20 01 28 01 30 d0 e7 01`));
  const a = reply.response.acquire;
  assert.equal(a.token, '9f8c2d4e-6a1b-4c3d-8e7f-0a1b2c3d4e5f');
  assert.equal(fromU64(a.fence), 1764470000123456n);
  assert.equal(a.valid_ms, 29648);
  assert.equal(a.watchdog, true);
  assert.equal(fromU64(toU64((1n << 64n) - 1n)), (1n << 64n) - 1n);
  assert.equal(fromU64(toU64(1n << 63n)), 1n << 63n);
  assert.throws(() => toU64(-1), RangeError);
  assert.throws(() => toU64(1n << 64n), RangeError);
});
