// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Daemon addresses, as librlock and rlockctl write them: HOST:PORT,
// [IPV6]:PORT, unix:/path, each optionally behind tls://.

/**
 * @param {string} text
 * @returns {{text: string, tls: boolean, path?: string, host?: string, port?: number}}
 */
function parseAddress(text) {
  if (typeof text !== 'string' || text.trim() === '') {
    throw new TypeError(`bad address ${JSON.stringify(text)}`);
  }
  const orig = text.trim();
  let rest = orig;
  let tls = false;
  if (rest.startsWith('tls://')) {
    tls = true;
    rest = rest.slice('tls://'.length);
  }
  if (rest.startsWith('unix:')) {
    const p = rest.slice('unix:'.length);
    if (p === '') throw new TypeError(`bad address ${JSON.stringify(orig)}: empty socket path`);
    return { text: orig, tls, path: p };
  }
  let host;
  let portText;
  const v6 = /^\[([^\]]+)\]:(\d+)$/.exec(rest);
  if (v6) {
    host = v6[1];
    portText = v6[2];
  } else {
    const i = rest.lastIndexOf(':');
    if (i <= 0 || rest.indexOf(':') !== i) {
      throw new TypeError(`bad address ${JSON.stringify(orig)}: want HOST:PORT, [IPV6]:PORT or unix:/path`);
    }
    host = rest.slice(0, i);
    portText = rest.slice(i + 1);
  }
  const port = /^\d{1,5}$/.test(portText) ? Number(portText) : NaN;
  if (!(port >= 1 && port <= 65535)) {
    throw new TypeError(`bad address ${JSON.stringify(orig)}: the port must be 1..65535`);
  }
  return { text: orig, tls, host, port };
}

/** The servers option (an array, or one comma-separated string) as parsed addresses. */
function parseServers(servers) {
  const list = typeof servers === 'string' ? servers.split(',') : servers;
  if (!Array.isArray(list) || list.length === 0) {
    throw new TypeError('servers: give at least one address');
  }
  return list.map((s) => parseAddress(s));
}

/**
 * The order to try addresses in: from a random entry onwards, wrapping
 * around, so that many clients spread over the daemons while each still
 * tries every one.
 */
function spreadOrder(addrs, random = Math.random) {
  const start = Math.floor(random() * addrs.length);
  return addrs.slice(start).concat(addrs.slice(0, start));
}

module.exports = { parseAddress, parseServers, spreadOrder };
