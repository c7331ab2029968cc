// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Framing (docs/protocol.md §2): a 4-byte big-endian length, then that many
// bytes of one protobuf message. Both directions use it.

// The daemon's frames are not bounded by its max_frame_bytes; admin pages are
// at most a few hundred KiB. Like librlock, accept up to 16 MiB and treat a
// longer announced length as a broken stream.
const MAX_FRAME_BYTES = 16 * 1024 * 1024;

class FrameError extends Error {}

function encodeFrame(body) {
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32BE(body.length, 0);
  out.set(body, 4);
  return out;
}

// Cuts a byte stream into frame bodies. Chunks are kept as they come and
// joined only when a frame is complete, so a large frame arriving in many
// pieces is copied once.
class FrameReader {
  constructor(maxBytes = MAX_FRAME_BYTES) {
    this.maxBytes = maxBytes;
    this.chunks = [];
    this.buffered = 0;
    this.need = -1; // body length of the frame being read; -1 = reading the header
  }

  /** Adds a chunk; returns the complete frame bodies. Throws FrameError. */
  push(chunk) {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames = [];
    for (;;) {
      if (this.need < 0) {
        if (this.buffered < 4) break;
        const len = this.take(4).readUInt32BE(0);
        if (len > this.maxBytes) {
          throw new FrameError(`the daemon announced a frame of ${len} bytes (limit ${this.maxBytes})`);
        }
        this.need = len;
      }
      if (this.buffered < this.need) break;
      frames.push(this.take(this.need));
      this.need = -1;
    }
    return frames;
  }

  take(n) {
    if (n === 0) return Buffer.alloc(0);
    let out;
    if (this.chunks[0].length >= n) {
      out = this.chunks[0].subarray(0, n);
      this.chunks[0] = this.chunks[0].subarray(n);
    } else {
      const all = Buffer.concat(this.chunks, this.buffered);
      out = all.subarray(0, n);
      this.chunks = [all.subarray(n)];
    }
    if (this.chunks[0].length === 0) this.chunks.shift();
    this.buffered -= n;
    return out;
  }
}

module.exports = { MAX_FRAME_BYTES, FrameReader, FrameError, encodeFrame };
