// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// A minimal Redis client for the tests (RESP2 over a unix socket): enough to
// look at and change the keys the daemon writes, with no dependency.

const net = require('node:net');

class RedisError extends Error {}

class Redis {
  static connect(path) {
    return new Promise((resolve, reject) => {
      const sock = net.connect({ path });
      sock.once('error', reject);
      sock.once('connect', () => {
        sock.removeListener('error', reject);
        resolve(new Redis(sock));
      });
    });
  }

  constructor(sock) {
    this.sock = sock;
    this.buf = Buffer.alloc(0);
    this.waiting = [];
    sock.on('data', (d) => this.onData(d));
    sock.on('error', (e) => this.failAll(e));
    sock.on('close', () => this.failAll(new Error('redis connection closed')));
  }

  command(...args) {
    const parts = [`*${args.length}\r\n`];
    for (const a of args) {
      const s = Buffer.from(String(a));
      parts.push(`$${s.length}\r\n`, s, '\r\n');
    }
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.sock.write(Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p)))));
    });
  }

  close() {
    this.sock.end();
  }

  failAll(err) {
    const w = this.waiting;
    this.waiting = [];
    for (const x of w) x.reject(err);
  }

  onData(d) {
    this.buf = Buffer.concat([this.buf, d]);
    for (;;) {
      const r = parse(this.buf, 0);
      if (!r) return;
      this.buf = this.buf.subarray(r.end);
      const w = this.waiting.shift();
      if (!w) continue;
      if (r.value instanceof RedisError) w.reject(r.value);
      else w.resolve(r.value);
    }
  }
}

// One reply from buf at i: {value, end}, or null when incomplete.
function parse(buf, i) {
  const eol = buf.indexOf('\r\n', i);
  if (eol < 0) return null;
  const type = String.fromCharCode(buf[i]);
  const line = buf.toString('utf8', i + 1, eol);
  const next = eol + 2;
  switch (type) {
    case '+': return { value: line, end: next };
    case '-': return { value: new RedisError(line), end: next };
    case ':': return { value: Number(line), end: next };
    case '$': {
      const n = Number(line);
      if (n < 0) return { value: null, end: next };
      if (buf.length < next + n + 2) return null;
      return { value: buf.toString('utf8', next, next + n), end: next + n + 2 };
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return { value: null, end: next };
      const out = [];
      let at = next;
      for (let k = 0; k < n; k++) {
        const r = parse(buf, at);
        if (!r) return null;
        out.push(r.value);
        at = r.end;
      }
      return { value: out, end: at };
    }
    default:
      throw new Error(`bad RESP type ${JSON.stringify(type)}`);
  }
}

module.exports = { Redis, RedisError };
