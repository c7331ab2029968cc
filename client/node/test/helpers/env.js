// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// A private redis-server and rlockd per test file: unix sockets in a temp
// directory, a config written there, both processes killed by pid at the end.
// RLOCKD_BIN names the daemon (default: build/bin/rlockd of this checkout);
// RLOCKD_NODE_KEEP=1 keeps the directory (logs, config) for a closer look.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const { Redis } = require('./redis');
const { connect } = require('../..');

const REPO = path.resolve(__dirname, '..', '..', '..', '..');
const RLOCKD_BIN = process.env.RLOCKD_BIN || path.join(REPO, 'build', 'bin', 'rlockd');
const REDIS_BIN = process.env.REDIS_SERVER_BIN || 'redis-server';
const START_DEADLINE_MS = 20000;

const live = new Set();
process.on('exit', () => {
  // A test that failed before its clean-up must not leave processes behind.
  for (const env of live) {
    env.killAll('SIGKILL');
    if (!process.env.RLOCKD_NODE_KEEP) fs.rmSync(env.dir, { recursive: true, force: true });
  }
});
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  // A run stopped from outside (a timeout) takes its daemons with it.
  process.once(sig, () => process.exit(1));
}

let seq = 0;

/** Polls fn (an async predicate) until it is true, or throws after ms. */
async function waitFor(what, fn, ms = 10000, every = 20) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      if (await fn()) return;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? ` (last error: ${last.message})` : ''}`);
    await sleep(every);
  }
}

class Env {
  constructor(extraIni, token) {
    this.token = token || '';
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlnode.'));
    this.redisSock = path.join(this.dir, 'redis.sock');
    this.rlockdSock = path.join(this.dir, 'rlockd.sock');
    this.metricsSock = path.join(this.dir, 'metrics.sock');
    this.confPath = path.join(this.dir, 'rlockd.conf');
    this.addr = `unix:${this.rlockdSock}`;
    this.prefix = `tn${process.pid}_${++seq}:`;
    this.extraIni = extraIni;
    this.redisPid = 0;
    this.rlockdPid = 0;
    this.procs = new Map();
    this.redis = null;
  }

  /** The Redis key of a resource's lock (docs/protocol.md §6.8). */
  key(resource) {
    return `${this.prefix}{${resource}}`;
  }

  spawnLogged(bin, args, logName) {
    const log = fs.openSync(path.join(this.dir, logName), 'a');
    const child = spawn(bin, args, { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    child.on('error', () => {});
    this.procs.set(child.pid, child);
    child.once('exit', () => this.procs.delete(child.pid));
    return child;
  }

  async startRedis() {
    const child = this.spawnLogged(REDIS_BIN, [
      '--port', '0', '--bind', '127.0.0.1', '--unixsocket', this.redisSock, '--unixsocketperm', '700',
      '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', this.dir, '--loglevel', 'warning',
    ], 'redis.log');
    this.redisPid = child.pid;
    await waitFor('redis-server to answer PING', async () => {
      if (!this.procs.has(child.pid)) throw new Error(`redis-server exited: ${this.tail('redis.log')}`);
      const r = await Redis.connect(this.redisSock);
      try {
        return (await r.command('PING')) === 'PONG';
      } finally {
        r.close();
      }
    }, START_DEADLINE_MS);
    this.redis = await Redis.connect(this.redisSock);
  }

  writeConfig() {
    fs.writeFileSync(this.confPath, [
      '[server]', `listen = ${this.addr}`, '',
      '[redis]', `address = unix:${this.redisSock}`, `key_prefix = ${this.prefix}`, '',
      '[metrics]', `listen = unix:${this.metricsSock}`, '',
      typeof this.extraIni === 'function' ? this.extraIni(this) : this.extraIni || '', '',
    ].join('\n'));
  }

  async startRlockd() {
    if (!fs.existsSync(RLOCKD_BIN)) throw new Error(`no rlockd at ${RLOCKD_BIN} (build it, or set RLOCKD_BIN)`);
    const child = this.spawnLogged(RLOCKD_BIN, ['-c', this.confPath], 'rlockd.log');
    this.rlockdPid = child.pid;
    // Ready: a session opens and every Redis connection is up.
    await waitFor('rlockd to serve with Redis ready', async () => {
      if (!this.procs.has(child.pid)) throw new Error(`rlockd exited: ${this.tail('rlockd.log')}`);
      const c = await connect({
        servers: [this.addr], name: 'test-harness', connectTimeout: 1000, token: this.token,
      });
      try {
        const st = await c.stats({ timeout: 2000 });
        return st.redisUp && st.redisConnectionsReady === st.redisConnections;
      } finally {
        await c.close();
      }
    }, START_DEADLINE_MS, 50);
  }

  tail(name, lines = 20) {
    try {
      return fs.readFileSync(path.join(this.dir, name), 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  rlockdRunning() {
    return this.procs.has(this.rlockdPid);
  }

  /** Signals rlockd and waits for it to exit. */
  async stopRlockd(signal = 'SIGTERM') {
    const child = this.procs.get(this.rlockdPid);
    if (!child) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  }

  /** Redis keys under this env's prefix (SCAN). */
  async keys(pattern = '*') {
    const out = [];
    let cursor = '0';
    do {
      const [next, batch] = await this.redis.command('SCAN', cursor, 'MATCH', `${this.prefix}${pattern}`, 'COUNT', 1000);
      out.push(...batch);
      cursor = next;
    } while (cursor !== '0');
    return out;
  }

  /** Lock keys (not fence counters) under this env's prefix. */
  async lockKeys() {
    return (await this.keys()).filter((k) => !k.endsWith(':fence'));
  }

  killAll(signal) {
    for (const child of this.procs.values()) {
      try {
        process.kill(child.pid, 'SIGCONT');
        process.kill(child.pid, signal);
      } catch { /* gone already */ }
    }
  }

  async stop() {
    live.delete(this);
    if (this.redis) this.redis.close();
    const exits = [...this.procs.values()].map((c) => new Promise((resolve) => {
      if (c.exitCode !== null || c.signalCode !== null) resolve();
      else c.once('exit', resolve);
    }));
    this.killAll('SIGKILL');
    await Promise.all(exits);
    if (process.env.RLOCKD_NODE_KEEP) {
      console.error(`kept ${this.dir}`);
    } else {
      fs.rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

/**
 * Starts redis-server and rlockd; extraIni (a string, or a function of the
 * env returning one) is appended to rlockd's config. token: what the
 * readiness check says Hello with; prepare(env): runs first (to write files
 * into env.dir).
 */
async function startEnv({ extraIni = '', token = '', prepare } = {}) {
  const env = new Env(extraIni, token);
  live.add(env);
  try {
    if (prepare) prepare(env);
    await env.startRedis();
    env.writeConfig();
    await env.startRlockd();
  } catch (e) {
    const logs = `\n--- rlockd.log\n${env.tail('rlockd.log')}\n--- redis.log\n${env.tail('redis.log')}`;
    await env.stop();
    e.message += logs;
    throw e;
  }
  return env;
}

module.exports = { startEnv, waitFor, sleep, REPO, RLOCKD_BIN };
