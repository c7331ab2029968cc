// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// An encoder that writes every field of a message, defaults included (0, "",
// false), as proto3 encoders that do not omit defaults do. Driven by the
// schema, so it covers every field of every request kind.

const { protobuf, Request } = require('../../lib/codec');

const WIRE = {
  double: 1, float: 5, int32: 0, uint32: 0, sint32: 0, fixed32: 5, sfixed32: 5,
  int64: 0, uint64: 0, sint64: 0, fixed64: 1, sfixed64: 1, bool: 0, string: 2, bytes: 2,
};

function writeMessage(w, type, obj) {
  for (const f of type.fieldsArray) {
    const inOneof = f.partOf !== null && f.partOf !== undefined;
    const v = obj[f.name];
    if (inOneof && (v === undefined || v === null)) continue; // only the member given
    if (f.repeated) continue; // requests carry no repeated fields
    if (f.resolvedType instanceof protobuf.Type) {
      w.uint32((f.id << 3) | 2).fork();
      writeMessage(w, f.resolvedType, v || {});
      w.ldelim();
    } else if (f.resolvedType instanceof protobuf.Enum) {
      w.uint32(f.id << 3).int32(v ?? 0);
    } else {
      const def = f.type === 'string' ? '' : f.type === 'bool' ? false : 0;
      w.uint32((f.id << 3) | WIRE[f.type])[f.type](v ?? def);
    }
  }
}

/** The bytes of a Request with every field written. */
function encodeExplicit(req) {
  const w = protobuf.Writer.create();
  writeMessage(w, Request, req);
  return w.finish();
}

module.exports = { encodeExplicit };
