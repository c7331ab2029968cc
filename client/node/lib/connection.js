// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Opening a connection: the socket (TCP, unix, either inside TLS), then the
// first request (Hello, or Resume) and its answer. What follows belongs to
// the engine.

const net = require('node:net');
const tls = require('node:tls');
const { performance } = require('node:perf_hooks');
const { FrameReader, FrameError, encodeFrame } = require('./framing');
const { encodeRequest, decodeServerMessage, u64Number } = require('./codec');
const { RlockError, fromResponse } = require('./errors');
const { spreadOrder } = require('./address');

// The address rlockd's default configuration listens on (RLOCK_DEFAULT_ADDRESS in rlock.h).
const DEFAULT_ADDRESS = '127.0.0.1:7483';

/** What to check after a connect failed with the system's error `code` (as librlock says it). */
function connectHint(code, isUnix) {
  switch (code) {
    case 'ENOENT':
      return '; no socket at that path: is rlockd running, and does its config\'s [server] '
        + `listen name it? (the default config listens on ${DEFAULT_ADDRESS} only)`;
    case 'EACCES':
    case 'EPERM':
      return '; this user may not open the socket: see its owner, group and mode (ls -l), '
        + 'which rlockd\'s unit sets with Group= and UMask=';
    case 'ECONNREFUSED':
      return isUnix
        ? '; nothing listens on that socket (left by an rlockd that stopped?): is rlockd '
          + 'running (systemctl status rlockd)?'
        : '; nothing listens there: is rlockd running (systemctl status rlockd), and does '
          + `its config's [server] listen include this address? (default ${DEFAULT_ADDRESS})`;
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return '; no answer from that host: check the address, and any firewall on the way';
    default:
      return '';
  }
}

/** Resolves with a connected socket (TLS: handshake done), or rejects with an Error. */
function openSocket(addr, tlsOpts, timeoutMs) {
  return new Promise((resolve, reject) => {
    let sock;
    const readyEvent = addr.tls ? 'secureConnect' : 'connect';
    if (!addr.tls) {
      sock = addr.path !== undefined ? net.connect({ path: addr.path })
        : net.connect({ host: addr.host, port: addr.port });
    } else {
      const o = tlsOpts || {};
      const options = {
        ca: o.ca, cert: o.cert, key: o.key, minVersion: 'TLSv1.2',
      };
      if (o.rejectUnauthorized === false) options.rejectUnauthorized = false;
      if (addr.path !== undefined) {
        // A unix socket has no host name: without `servername` the daemon's
        // certificate is checked against the CA alone.
        options.socket = net.connect({ path: addr.path });
        if (o.servername) options.servername = o.servername;
        else options.checkServerIdentity = () => undefined;
      } else {
        options.host = addr.host;
        options.port = addr.port;
        if (o.servername) options.servername = o.servername;
        else if (!net.isIP(addr.host)) options.servername = addr.host;
      }
      sock = tls.connect(options);
    }
    const timer = setTimeout(() => fail(new Error(`no connection within ${Math.round(timeoutMs)} ms`)), timeoutMs);
    function done() {
      clearTimeout(timer);
      sock.removeListener('error', failed);
      sock.removeListener(readyEvent, ok);
    }
    function fail(err) {
      done();
      sock.destroy();
      reject(err);
    }
    function ok() {
      done();
      if (addr.path === undefined) sock.setNoDelay(true);
      resolve(sock);
    }
    // The system's error, with what to check.
    function failed(err) {
      const hinted = new Error(err.message + connectHint(err.code, addr.path !== undefined));
      hinted.code = err.code;
      fail(hinted);
    }
    sock.once(readyEvent, ok);
    sock.once('error', failed);
  });
}

/**
 * Sends `request` (id 1: Hello or Resume) on a fresh socket and waits for its
 * answer. Resolves {response, reader, rest}: the reader holds any bytes after
 * that answer, `rest` any further complete frames. The socket is left paused
 * and without listeners for the engine to take over. Rejects with an
 * RlockError carrying the daemon's status when it refused, else an Error.
 */
function handshake(sock, request, timeoutMs) {
  return new Promise((resolve, reject) => {
    const reader = new FrameReader();
    const timer = setTimeout(() => fail(new Error(`no answer to ${Object.keys(request).find((k) => k !== 'id')} within ${Math.round(timeoutMs)} ms`)), timeoutMs);
    function cleanup() {
      clearTimeout(timer);
      sock.removeListener('data', onData);
      sock.removeListener('error', fail);
      sock.removeListener('close', onClose);
    }
    function fail(err) {
      cleanup();
      sock.destroy();
      reject(err);
    }
    function onClose() {
      fail(new Error('the daemon closed the connection before answering (full, or stopping?)'));
    }
    function onData(chunk) {
      let frames;
      try {
        frames = reader.push(chunk);
      } catch (e) {
        fail(new RlockError('PROTOCOL', e instanceof FrameError ? e.message : String(e)));
        return;
      }
      for (let i = 0; i < frames.length; i++) {
        let msg;
        try {
          msg = decodeServerMessage(frames[i]);
        } catch (e) {
          fail(new RlockError('PROTOCOL', `undecodable frame from the daemon: ${e.message}`));
          return;
        }
        if (!msg.response) continue; // an event before the answer: nothing to act on yet
        const r = msg.response;
        const id = u64Number(r.id);
        if (id !== request.id && id !== 0) continue;
        if (r.status !== 0) {
          fail(fromResponse(r, 'the daemon refused the session'));
          return;
        }
        if (!r.hello) {
          fail(new RlockError('PROTOCOL', 'the daemon answered the Hello without a HelloReply'));
          return;
        }
        cleanup();
        sock.pause();
        resolve({ response: r, reader, rest: frames.slice(i + 1) });
        return;
      }
    }
    sock.on('data', onData);
    sock.once('error', fail);
    sock.once('close', onClose);
    sock.write(encodeFrame(encodeRequest(request)));
  });
}

// A refusal that another daemon of the list would give as well ends the
// search; a full daemon (LIMIT_EXCEEDED) or a failed connect does not.
function isFinal(err) {
  return err instanceof RlockError && err.code !== 'LIMIT_EXCEEDED' && err.code !== 'PROTOCOL';
}

/**
 * Tries the addresses in spread order until one connects and accepts
 * `request`. Each try gets an equal share of what is left of timeoutMs, so a
 * daemon that swallows connects cannot use up the others' time.
 */
async function connectAny(addrs, request, { tls: tlsOpts, timeoutMs }) {
  const order = spreadOrder(addrs);
  const deadline = performance.now() + timeoutMs;
  const failures = [];
  for (let i = 0; i < order.length; i++) {
    const left = deadline - performance.now();
    if (left <= 0) {
      failures.push(`${order[i].text}: not tried (connect timeout spent)`);
      continue;
    }
    const share = left / (order.length - i);
    const started = performance.now();
    let sock;
    try {
      sock = await openSocket(order[i], tlsOpts, share);
      const hs = await handshake(sock, request, Math.max(1, share - (performance.now() - started)));
      return { sock, addr: order[i], ...hs };
    } catch (e) {
      if (sock) sock.destroy();
      if (isFinal(e)) throw e;
      failures.push(`${order[i].text}: ${e.message}`);
    }
  }
  throw new RlockError('CONNECT', `could not open a session: ${failures.join('; ')}`);
}

module.exports = { openSocket, handshake, connectAny, connectHint };
