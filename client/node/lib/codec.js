// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The wire codec: rlock.proto loaded at run time with protobufjs's parser,
// Request encoding, ServerMessage decoding, and 64-bit integers as bigint.

const fs = require('node:fs');
const path = require('node:path');
const protobuf = require('protobufjs');

const Long = protobuf.util.Long;

// The schema ships inside the package (copied there by `npm pack`'s prepack
// script); in a checkout of the repository it is read from proto/ at the top.
const PROTO_CANDIDATES = [
  path.join(__dirname, '..', 'proto', 'rlock.proto'),
  path.join(__dirname, '..', '..', '..', 'proto', 'rlock.proto'),
];

function findProto() {
  for (const p of PROTO_CANDIDATES) {
    if (fs.existsSync(p)) return p;
  }
  throw new Error(`rlock.proto not found (looked at ${PROTO_CANDIDATES.join(', ')})`);
}

const root = new protobuf.Root();
// keepCase: the field names stay those of the schema (session_timeout_ms),
// as in docs/protocol.md.
root.loadSync(findProto(), { keepCase: true });
root.resolveAll();

const Request = root.lookupType('rlock.v1.Request');
const ServerMessage = root.lookupType('rlock.v1.ServerMessage');

/** A uint64 for the encoder, from a bigint or a safe integer. */
function toU64(v) {
  const b = BigInt(v);
  if (b < 0n || b >= 1n << 64n) throw new RangeError(`${v} is not a uint64`);
  return Long.fromBits(Number(b & 0xffffffffn) | 0, Number(b >> 32n) | 0, true);
}

/** A decoded uint64 (Long, or a number when Long is absent) as a bigint. */
function fromU64(v) {
  if (v === null || v === undefined) return 0n;
  if (typeof v === 'number') return BigInt(v);
  if (typeof v === 'bigint') return v;
  return (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
}

/** A decoded uint64 that counts something (ms, entries): a Number. */
function u64Number(v) {
  return Number(fromU64(v));
}

/** Encodes one Request: {id, <body name>: fields}. */
function encodeRequest(req) {
  return Request.encode(req).finish();
}

/** Decodes one ServerMessage; throws on bytes that are not one. */
function decodeServerMessage(buf) {
  return ServerMessage.decode(buf);
}

module.exports = {
  protobuf, root, Request, ServerMessage, toU64, fromU64, u64Number,
  encodeRequest, decodeServerMessage, protoPath: findProto,
};
