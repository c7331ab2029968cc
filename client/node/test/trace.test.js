// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// A trace id set on an acquire (opts.traceId; docs/protocol.md §6.12) is on the
// daemon's log lines about that lock: its grant and its release; a bad id is
// refused before it is sent.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { startEnv } = require('./helpers/env');
const { connect } = require('..');

let env;
test.before(async () => { env = await startEnv(); });
test.after(async () => { if (env) await env.stop(); });

const TRACE = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

async function logLine(text, deadlineMs = 10000) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const log = fs.readFileSync(path.join(env.dir, 'rlockd.log'), 'utf8');
    const line = log.split('\n').find((l) => l.includes(text));
    if (line) return line;
    if (Date.now() > end) assert.fail(`no log line with '${text}'`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('the trace id is on the grant and release lines', async () => {
  const c = await connect({ servers: [env.addr], name: 'node-trace' });
  try {
    const lock = await c.acquire('trace:node', { ttl: 10000, traceId: TRACE });
    await logLine(`trace ${TRACE}: session ${c.sessionId} (node-trace): granted trace:node`);
    await lock.release();
    await logLine(`trace ${TRACE}: session ${c.sessionId} (node-trace): released trace:node`);
  } finally {
    await c.close();
  }
});

test('a bad trace id is refused before it is sent', async () => {
  const c = await connect({ servers: [env.addr] });
  try {
    for (const bad of ['has space', 'quo"te', 'back\\slash', 'x'.repeat(129), 'é']) {
      await assert.rejects(c.acquire('trace:bad', { traceId: bad }), RangeError);
    }
    await assert.rejects(c.acquire('trace:bad', { traceId: 42 }), TypeError);
    const lock = await c.acquire('trace:bad', { traceId: 'y'.repeat(128) });
    await lock.release();
  } finally {
    await c.close();
  }
});
