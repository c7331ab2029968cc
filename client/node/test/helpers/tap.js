// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// A unix-socket relay between a client and rlockd that keeps a copy of
// every frame the client sends, to look at what went over the wire.

const net = require('node:net');
const { FrameReader } = require('../../lib/framing');

function startTap(listenPath, targetPath) {
  const frames = [];
  const server = net.createServer((down) => {
    const up = net.connect({ path: targetPath });
    const reader = new FrameReader();
    down.on('data', (chunk) => {
      frames.push(...reader.push(chunk));
      up.write(chunk);
    });
    up.on('data', (chunk) => down.write(chunk));
    down.on('close', () => up.end());
    up.on('close', () => down.end());
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenPath, () => resolve({ server, frames }));
  });
}

module.exports = { startTap };
