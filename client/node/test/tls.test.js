// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// TLS (tls:// addresses, node:tls) and authentication tokens, against a daemon
// with a [tls] listener on a unix socket and [auth] tokens. The certificates
// are made with the openssl command for this test.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { startEnv } = require('./helpers/env');
const { connect } = require('..');

const ADMIN = 'admin-token-0123456789abcdef';
const CLIENT = 'client-token-0123456789abcdef';

function openssl(dir, args) {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA, a server certificate for localhost signed by it, and an unrelated CA. */
function makeCerts(dir) {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, ['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=rlockd test CA']);
  openssl(dir, ['req', '-x509', ...ec, '-keyout', 'other.key', '-out', 'other.pem', '-days', '2', '-subj', '/CN=another CA']);
  openssl(dir, ['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost']);
  fs.writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(dir, ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
    '-out', 'server.pem', '-days', '2', '-extfile', 'ext.cnf']);
  fs.chmodSync(path.join(dir, 'server.key'), 0o600);
}

let env;
let tlsAddr;
test.before(async () => {
  env = await startEnv({
    token: ADMIN,
    prepare: (e) => makeCerts(e.dir),
    extraIni: (e) => [
      '[tls]', `listen = unix:${path.join(e.dir, 'tls.sock')}`,
      `cert_file = ${path.join(e.dir, 'server.pem')}`, `key_file = ${path.join(e.dir, 'server.key')}`, '',
      '[auth]', `tokens = admin ${ADMIN}, client ${CLIENT}`, '',
    ].join('\n'),
  });
  tlsAddr = `tls://unix:${path.join(env.dir, 'tls.sock')}`;
});
test.after(async () => { if (env) await env.stop(); });

const ca = () => fs.readFileSync(path.join(env.dir, 'ca.pem'));

test('a session over TLS, the certificate checked against the CA and the server name', async () => {
  const c = await connect({ servers: [tlsAddr], token: ADMIN, tls: { ca: ca(), servername: 'localhost' } });
  try {
    const l = await c.acquire('tls:x');
    assert.equal(await env.redis.command('GET', env.key('tls:x')), l.token);
    assert.equal(await l.release(), 0);
    const sessions = await c.sessions();
    assert.ok(sessions.some((s) => s.sessionId === c.sessionId && s.role === 'admin'));
  } finally {
    await c.close();
  }
  // Without a servername, a unix address is checked against the CA alone.
  const d = await connect({ servers: [tlsAddr], token: ADMIN, tls: { ca: ca() } });
  await d.close();
});

test('a certificate of another CA, or for another name, is refused: CONNECT', async () => {
  const other = fs.readFileSync(path.join(env.dir, 'other.pem'));
  const e1 = await connect({ servers: [tlsAddr], token: ADMIN, tls: { ca: other, servername: 'localhost' } })
    .then(() => null, (e) => e);
  assert.equal(e1.code, 'CONNECT');
  assert.match(e1.message, /verify|certificate/i);
  const e2 = await connect({ servers: [tlsAddr], token: ADMIN, tls: { ca: ca(), servername: 'db.example' } })
    .then(() => null, (e) => e);
  assert.equal(e2.code, 'CONNECT');
  assert.match(e2.message, /db\.example/);
});

test('a plain connection to the TLS listener: the daemon says INVALID', async () => {
  const err = await connect({ servers: [`unix:${path.join(env.dir, 'tls.sock')}`], token: ADMIN, connectTimeout: 3000 })
    .then(() => null, (e) => e);
  assert.ok(err);
  assert.equal(err.code, 'INVALID');
  assert.match(err.message, /TLS listener/);
});

test('tokens: none or a wrong one is UNAUTHENTICATED; a client token may lock but not administer', async () => {
  for (const token of ['', 'not-a-token-0123456789']) {
    const err = await connect({ servers: [env.addr], token }).then(() => null, (e) => e);
    assert.equal(err.code, 'UNAUTHENTICATED');
  }
  const c = await connect({ servers: [env.addr], token: CLIENT });
  try {
    const l = await c.acquire('auth:x');
    await l.release();
    const denied = await c.serverInfo().then(() => null, (e) => e);
    assert.equal(denied.code, 'PERMISSION_DENIED');
    assert.equal(c.closed, false);
  } finally {
    await c.close();
  }
});
