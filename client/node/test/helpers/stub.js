// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The one stand-in for the daemon: a unix-socket server that answers Hello
// and Acquire as rlockd would, and answers a Ping with whatever bytes the
// test asks for (a frame too large, undecodable, or the wrong reply), to
// watch the client end its session cleanly.

const net = require('node:net');
const { FrameReader, encodeFrame } = require('../../lib/framing');
const { Request, ServerMessage, u64Number } = require('../../lib/codec');

function reply(msg) {
  return encodeFrame(ServerMessage.encode(msg).finish());
}

/**
 * Listens on `path`. onPing(id) returns the bytes to send for a Ping.
 * Resolves {server, closedByClient: Promise} once listening; closedByClient
 * resolves when the client's connection has closed.
 */
function startStub(path, onPing) {
  let closedResolve;
  const closedByClient = new Promise((resolve) => { closedResolve = resolve; });
  const server = net.createServer((sock) => {
    const reader = new FrameReader();
    sock.on('error', () => {});
    sock.on('close', () => closedResolve());
    sock.on('data', (chunk) => {
      for (const frame of reader.push(chunk)) {
        const req = Request.decode(frame);
        const id = u64Number(req.id);
        if (req.hello) {
          sock.write(reply({
            response: {
              id,
              hello: {
                session_id: '00000000-0000-4000-8000-000000000001', server_version: 'stub',
                protocol_version: 1, session_timeout_ms: 10000, keepalive_interval_ms: 3333,
                default_ttl_ms: 30000, max_ttl_ms: 3600000, max_wait_ms: 600000, min_ttl_ms: 1000,
              },
            },
          }));
        } else if (req.acquire && ['granted', 'lost-at-once'].includes(req.acquire.resource)) {
          const token = `9f8c2d4e-6a1b-4c3d-8e7f-0a1b2c3d4e${id.toString(16).padStart(2, '0')}`;
          const grant = reply({
            response: {
              id,
              acquire: {
                token, fence: 42, ttl_ms: 30000, hold_count: 1, watchdog: true, valid_ms: 29000,
              },
            },
          });
          // lost-at-once: the grant and its loss in one write, read together.
          const lost = req.acquire.resource !== 'lost-at-once' ? Buffer.alloc(0) : reply({
            event: {
              lock_lost: {
                resource: 'lost-at-once', token, fence: 42, reason: 3, message: 'the key is gone',
              },
            },
          });
          sock.write(Buffer.concat([grant, lost]));
        } else if (req.ping) {
          sock.write(onPing(id));
        }
        // Anything else (an Acquire left waiting) gets no answer.
      }
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve({ server, closedByClient }));
  });
}

module.exports = { startStub, reply };
