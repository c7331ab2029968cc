// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Shared pieces of the tests of lock kinds (shared.test.js, semaphore.test.js):
// one env for a file, clients made and closed around a test body, a promise's
// outcome watched while it is still pending, and a resource's keys in Redis.

const path = require('node:path');
const test = require('node:test');
const assert = require('node:assert/strict');
const { once } = require('node:events');
const { setTimeout: sleep } = require('node:timers/promises');
const { startEnv } = require('./env');
const { connect } = require('../..');

/**
 * Start one env before the file's tests and stop it after them. Returns an
 * object whose `env` is set once started, and `withClients(n, fn)`, which
 * runs fn with n fresh clients named `${name}-i` and closes them afterwards.
 */
function kindsSuite(name) {
  const suite = { env: null };
  test.before(async () => { suite.env = await startEnv(); });
  test.after(async () => { if (suite.env) await suite.env.stop(); });
  suite.withClients = async (n, fn) => {
    const clients = await Promise.all(Array.from({ length: n },
      (_, i) => connect({ servers: [suite.env.addr], name: `${name}-${i}` })));
    try {
      return await fn(...clients);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  };
  /** Lock keys of one resource (the marker, holders, permits, a claim; not its fence counter). */
  suite.keysOf = async (resource) =>
    (await suite.env.keys(`{${resource}}*`)).filter((k) => !k.endsWith(':fence')).sort();
  return suite;
}

/** A promise's outcome so far: 'pending', or {value} / {error} once it has settled. */
function track(p) {
  const t = { outcome: 'pending' };
  t.done = p.then(
    (value) => { t.outcome = { value }; return value; },
    (error) => { t.outcome = { error }; throw error; },
  );
  t.done.catch(() => {});
  return t;
}

/** The error p rejects with (fails the test if it resolves). */
function failure(p) {
  return p.then((v) => assert.fail(`expected a rejection, got ${v}`), (e) => e);
}

/**
 * A session moved across a restart of its daemon (SIGTERM: handover, with a
 * resume key): a client holds an exclusive lock `mv:x` and `resource` taken
 * with opts (ttl 3 s); the daemon restarts; past the ttl, both must still be
 * held, neither lost. Then body({ menv, client, x, lock, more }) checks the
 * rest (more(name) connects another client, closed at the end) and releases
 * `lock`; `mv:x` is released here.
 */
async function afterRestart(name, resource, opts, body) {
  const menv = await startEnv({
    extraIni: (e) => `[session]\nresume_key_file = ${path.join(e.dir, 'resume.key')}\n`,
  });
  const client = await connect({ servers: [menv.addr], name, sessionTimeout: 20000 });
  const others = [];
  try {
    const x = await client.acquire('mv:x', { ttl: 15000 });
    const lock = await client.acquire(resource, { ttl: 3000, ...opts });
    let lost = null;
    lock.on('lost', (err) => { lost = err; });
    const resumed = once(client, 'resumed');
    await menv.stopRlockd('SIGTERM');
    await menv.startRlockd();
    await resumed;
    // Past the lease's ttl: only renewals by the new daemon keep it.
    await sleep(4000);
    assert.equal(lost, null);
    assert.equal(lock.state, 'held');
    assert.equal(x.state, 'held');
    const more = async (n) => {
      const c = await connect({ servers: [menv.addr], name: n });
      others.push(c);
      return c;
    };
    await body({ menv, client, x, lock, more });
    assert.equal(await x.release(), 0);
  } finally {
    for (const c of others) await c.close();
    await client.close();
    await menv.stop();
  }
}

module.exports = { kindsSuite, track, failure, afterRestart };
