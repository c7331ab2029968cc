#!/usr/bin/env node
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// One peer's run of the benchmark's pair workload (docs/benchmarks.md), printed
// as ONE JSON line with the field names of `rlock-bench --json`, so that
// ./scripts/bench can put the peers beside the baseline and rlockd.
//
// A pair is acquire + release of `bench/<n>`, n uniform over --resources; its
// latency runs from the first try to the release's completion. A try that finds
// the resource held is retried after --retry-us (1 ms). --workers async workers
// run in this one process (Node's own concurrency), sharing what the peer's
// users share: one Redis connection, one etcd client, one rlockd session. They
// connect first, run --warmup seconds unmeasured, and only pairs that complete
// within the --duration window count.
//
// Peers:
//   seed         the seed article's own code (ioredis): SET key token NX PX ttl,
//                then EVAL of the compare-and-delete script; the retry is ours
//   redlock      node-redlock 5 on the one Redis; held tries are retried by
//                redlock itself (retryDelay = --retry-us, no jitter)
//   etcd         the npm etcd3 client's Lock: a lease (granted, kept alive) and
//                a put if the key's create revision is 0; release revokes the lease
//   etcd-http    the same three etcd requests (lease grant, the transaction, lease
//                revoke) through etcd's JSON gateway over keep-alive HTTP/1.1, with
//                Node's own http module: etcd's cost without the gRPC client's
//   rlockd-node  the project's Node.js client (client/node), one session; acquire
//                without wait (NOT_ACQUIRED when held), then release
//
//   node peers.js --peer seed --redis 127.0.0.1:6379 --workers 50 --warmup 1 --duration 5
//   node peers.js --peer etcd --server http://127.0.0.1:2379 --workers 1
//   node peers.js --peer rlockd-node --server unix:/run/rlockd/rlockd.sock
// --pid NAME=PID (repeatable; NAME one of redis, rlockd, etcd) adds that process's
// CPU over the window (utime+stime from /proc/PID/stat), as cpu_NAME_pct and
// cpu_NAME_us_per_pair; the client's own is always reported.

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { parseArgs } = require('node:util');

const PEERS = ['seed', 'redlock', 'etcd', 'etcd-http', 'rlockd-node'];
const CLK_TCK = 100; // Linux's USER_HZ, the unit of /proc/PID/stat's times

function usage(msg) {
  if (msg) process.stderr.write(`peers.js: ${msg}\n`);
  process.stderr.write(
    'usage: node peers.js --peer seed|redlock|etcd|etcd-http|rlockd-node [--redis HOST:PORT|unix:PATH]\n' +
      '         [--server ADDR] [--workers N] [--warmup S] [--duration S] [--resources N]\n' +
      '         [--ttl-ms MS] [--retry-us US] [--prefix P] [--pid NAME=PID]...\n',
  );
  process.exit(2);
}

function options() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        peer: { type: 'string' },
        server: { type: 'string' },
        redis: { type: 'string' },
        workers: { type: 'string', default: '1' },
        warmup: { type: 'string', default: '1' },
        duration: { type: 'string', default: '5' },
        resources: { type: 'string', default: '100000' },
        'ttl-ms': { type: 'string', default: '30000' },
        'retry-us': { type: 'string', default: '1000' },
        prefix: { type: 'string', default: 'peers:' },
        grace: { type: 'string', default: '10' },
        pid: { type: 'string', multiple: true, default: [] },
        json: { type: 'boolean', default: true }, // accepted for rlock-bench's habit; always JSON
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    usage(e.message);
  }
  if (values.help) usage();
  const num = (name, min, int) => {
    const v = Number(values[name]);
    if (!Number.isFinite(v) || v < min || (int && !Number.isInteger(v))) usage(`--${name}: ${values[name]}`);
    return v;
  };
  const o = {
    peer: values.peer,
    server: values.server,
    redis: values.redis,
    workers: num('workers', 1, true),
    warmup: num('warmup', 0, false),
    duration: num('duration', 0.001, false),
    resources: num('resources', 1, true),
    ttlMs: num('ttl-ms', 1000, true),
    retryUs: num('retry-us', 0, true),
    prefix: values.prefix,
    grace: num('grace', 0, false),
    pids: {},
  };
  if (!PEERS.includes(o.peer)) usage(`--peer must be one of ${PEERS.join(', ')}`);
  for (const p of values.pid) {
    const m = /^(redis|rlockd|etcd)=([0-9]+)$/.exec(p);
    if (!m) usage(`--pid ${p}: NAME=PID with NAME redis, rlockd or etcd`);
    o.pids[m[1]] = Number(m[2]);
  }
  if ((o.peer === 'seed' || o.peer === 'redlock') && !(o.redis || o.server)) usage(`--peer ${o.peer} needs --redis`);
  if ((o.peer === 'etcd' || o.peer === 'etcd-http' || o.peer === 'rlockd-node') && !o.server) usage(`--peer ${o.peer} needs --server`);
  return o;
}

/** ioredis options for HOST:PORT, [V6]:PORT, unix:PATH or a bare /path. */
function redisOptions(addr) {
  if (addr.startsWith('unix:')) return { path: addr.slice(5) };
  if (addr.startsWith('/')) return { path: addr };
  const m = /^\[?([^\]]*?)\]?:([0-9]+)$/.exec(addr);
  if (!m) throw new Error(`not a Redis address: ${addr}`);
  return { host: m[1], port: Number(m[2]) };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- the peers: each is { name, server, open(), tryAcquire(key) -> handle|null, release(handle), close() }
// tryAcquire answers null when the resource is held (one try); it may itself count
// several tries (redlock retries on its own) through handle.attempts.

const releaseLockScript = `
if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end
`;

function seedPeer(o) {
  const Redis = require('ioredis');
  const addr = o.redis || o.server;
  let redis;
  return {
    target: 'seed',
    server: addr,
    async open() {
      // The article's one module-level connection, shared by every caller.
      redis = new Redis({ ...redisOptions(addr), maxRetriesPerRequest: 2 });
      await redis.ping();
    },
    key: (r) => `${o.prefix}seed:{${r}}`,
    // The article's acquireLock (PX: the benchmark's ttl is in ms) and releaseLock.
    async tryAcquire(key) {
      const token = crypto.randomUUID();
      const result = await redis.set(key, token, 'PX', o.ttlMs, 'NX');
      return result === 'OK' ? { key, token } : null;
    },
    async release(h) {
      const result = await redis.eval(releaseLockScript, 1, h.key, h.token);
      if (result !== 1) throw new BenchError('lost', `${h.key} no longer held this token`);
    },
    async close() {
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}

function redlockPeer(o) {
  const Redis = require('ioredis');
  const Redlock = require('redlock').default;
  const addr = o.redis || o.server;
  let redis;
  let redlock;
  return {
    target: 'redlock',
    server: addr,
    async open() {
      redis = new Redis({ ...redisOptions(addr), maxRetriesPerRequest: 2 });
      await redis.ping();
      // Its own retry stands for ours: every --retry-us, no jitter, for up to a ttl.
      const retryMs = Math.max(0, Math.round(o.retryUs / 1000));
      redlock = new Redlock([redis], {
        retryCount: Math.ceil(o.ttlMs / Math.max(1, retryMs)),
        retryDelay: retryMs,
        retryJitter: 0,
      });
      redlock.on('error', () => {}); // counted where the call fails
    },
    key: (r) => `${o.prefix}redlock:{${r}}`,
    async tryAcquire(key) {
      try {
        const lock = await redlock.acquire([key], o.ttlMs);
        return { lock, attempts: lock.attempts.length };
      } catch (e) {
        throw classifyRedlock(e);
      }
    },
    async release(h) {
      try {
        await h.lock.release();
      } catch (e) {
        throw classifyRedlock(e);
      }
    },
    async close() {
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** A redlock ExecutionError names its votes against: the first one's message, or its own. */
async function redlockReason(e) {
  try {
    const stats = await Promise.all(e.attempts || []);
    for (const s of stats.reverse()) for (const err of s.votesAgainst.values()) return `${err.name}: ${err.message}`;
  } catch (_) {
    /* fall through */
  }
  return e.message;
}

function classifyRedlock(e) {
  const be = new BenchError(e.name === 'ExecutionError' ? 'quorum' : 'redis', e.message);
  be.pending = e.name === 'ExecutionError' ? redlockReason(e) : null;
  return be;
}

function etcdPeer(o) {
  const { Etcd3, EtcdLockFailedError } = require('etcd3');
  const host = /^[a-z]+:\/\//.test(o.server) ? o.server : `http://${o.server}`;
  const ttlS = Math.max(1, Math.ceil(o.ttlMs / 1000));
  let client;
  return {
    target: 'etcd',
    server: o.server,
    async open() {
      client = new Etcd3({ hosts: host, dialTimeout: 5000 });
      await client.get('peers/ping').string(); // the channel is up before the clock starts
    },
    key: (r) => r,
    async tryAcquire(key) {
      const lock = client.lock(key).ttl(ttlS);
      try {
        await lock.acquire();
        return { lock };
      } catch (e) {
        if (e instanceof EtcdLockFailedError) return null; // held (the client revoked its lease)
        throw new BenchError('etcd', `${e.name}: ${e.message}`);
      }
    },
    async release(h) {
      try {
        await h.lock.release();
      } catch (e) {
        throw new BenchError('etcd', `${e.name}: ${e.message}`);
      }
    },
    async close() {
      if (client) client.close();
    },
  };
}

function etcdHttpPeer(o) {
  const http = require('node:http');
  const m = /^(?:http:\/\/)?([^:/]+):([0-9]+)\/?$/.exec(o.server);
  if (!m) usage(`--server ${o.server}: HOST:PORT or http://HOST:PORT for etcd-http`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.workers });
  const ttlS = Math.max(1, Math.ceil(o.ttlMs / 1000));
  const b64 = (v) => Buffer.from(v).toString('base64');
  // post PATH BODY: etcd's JSON answer, or a BenchError for anything but 200.
  const post = (p, body) =>
    new Promise((resolve, reject) => {
      const data = JSON.stringify(body);
      const req = http.request(
        { host: m[1], port: Number(m[2]), path: p, method: 'POST', agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c) => (text += c));
          res.on('end', () => {
            if (res.statusCode !== 200) {
              reject(new BenchError('etcd', `${p}: HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
              return;
            }
            try {
              resolve(JSON.parse(text));
            } catch (e) {
              reject(new BenchError('etcd', `${p}: ${e.message}`));
            }
          });
        },
      );
      req.on('error', (e) => reject(new BenchError('etcd', `${p}: ${e.message}`)));
      req.end(data);
    });
  return {
    target: 'etcd-http',
    server: o.server,
    async open() {
      await post('/v3/kv/range', { key: b64('peers/ping') });
    },
    key: (r) => r,
    async tryAcquire(key) {
      const lease = (await post('/v3/lease/grant', { TTL: ttlS })).ID;
      const k = b64(key);
      const txn = await post('/v3/kv/txn', {
        compare: [{ key: k, target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
        success: [{ request_put: { key: k, value: b64('held'), lease } }],
      });
      if (txn.succeeded === true) return { lease };
      await post('/v3/lease/revoke', { ID: lease }); // held: give the lease back
      return null;
    },
    async release(h) {
      await post('/v3/lease/revoke', { ID: h.lease }); // deletes the key with the lease
    },
    async close() {
      agent.destroy();
    },
  };
}

function rlockdNodePeer(o) {
  const root = path.resolve(__dirname, '../../..');
  const { connect } = require(path.join(root, 'client/node'));
  let client;
  return {
    target: 'rlockd-node',
    server: o.server,
    async open() {
      client = await connect({ servers: [o.server], name: 'rlock-bench-peers' });
    },
    key: (r) => r,
    async tryAcquire(key) {
      try {
        return { lock: await client.acquire(key, { ttl: o.ttlMs }) };
      } catch (e) {
        if (e && e.code === 'NOT_ACQUIRED') return null;
        throw new BenchError('rlockd', `${e.code || e.name}: ${e.message}`);
      }
    },
    async release(h) {
      try {
        await h.lock.release();
      } catch (e) {
        throw new BenchError('rlockd', `${e.code || e.name}: ${e.message}`);
      }
    },
    async close() {
      if (client) await client.close().catch(() => {});
    },
  };
}

class BenchError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

// ---- CPU of this process and of the servers, at the window's edges

function procCpuUs(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK; // utime, stime (fields 14, 15)
  } catch (_) {
    return null;
  }
}

function cpuSample(pids) {
  const u = process.cpuUsage();
  const s = { client: u.user + u.system };
  for (const [name, pid] of Object.entries(pids)) s[name] = procCpuUs(pid);
  return s;
}

// ---- the run

function quantile(sorted, q) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

const round = (v, d) => Math.round(v * 10 ** d) / 10 ** d;

async function main() {
  const o = options();
  const peer = {
    seed: seedPeer,
    redlock: redlockPeer,
    etcd: etcdPeer,
    'etcd-http': etcdHttpPeer,
    'rlockd-node': rlockdNodePeer,
  }[o.peer](o);
  const retryMs = o.retryUs / 1000;
  const now = () => performance.now();

  const lat = []; // µs of the pairs completed in the window
  const errors = {};
  let firstError = '';
  let firstErrorPending = null;
  let attempts = 0;
  let acquireMaxUs = 0;
  const perWorker = new Array(o.workers).fill(0);
  const finished = new Array(o.workers).fill(false);

  let phase = 'warmup'; // warmup -> window -> stop
  let winBegin = 0;
  let winEnd = 0;

  function fail(e) {
    const kind = e instanceof BenchError ? e.kind : 'other';
    errors[kind] = (errors[kind] || 0) + 1;
    if (!firstError) {
      firstError = e.message || String(e);
      if (e.pending) firstErrorPending = e.pending.then((m) => (firstError = m));
    }
  }

  async function worker(i) {
    try {
      await workerLoop(i);
    } finally {
      finished[i] = true;
    }
  }

  async function workerLoop(i) {
    while (phase !== 'stop') {
      const key = peer.key(`bench/${crypto.randomInt(o.resources)}`);
      const t0 = now();
      let tries = 0;
      try {
        let h = null;
        for (;;) {
          h = await peer.tryAcquire(key);
          if (h) {
            tries += h.attempts || 1;
            break;
          }
          tries++;
          if (phase === 'stop') break;
          await sleep(retryMs);
        }
        if (!h) break; // stopped while the resource was held
        const tAcq = now();
        await peer.release(h);
        const t1 = now();
        if (phase === 'window' && t1 <= winEnd) {
          lat.push((t1 - t0) * 1000);
          attempts += tries;
          acquireMaxUs = Math.max(acquireMaxUs, (tAcq - t0) * 1000);
          perWorker[i]++;
        }
      } catch (e) {
        fail(e); // in the warmup too: a peer that fails there is not measured as it is used
        await sleep(Math.max(1, retryMs)); // no spinning on a failing server
      }
    }
  }

  try {
    await peer.open();
  } catch (e) {
    process.stderr.write(`peers.js: ${o.peer}: cannot connect to ${peer.server}: ${e.message}\n`);
    await peer.close().catch(() => {});
    process.exit(1);
  }

  const running = Array.from({ length: o.workers }, (_, i) => worker(i));
  await sleep(o.warmup * 1000);
  const cpu0 = cpuSample(o.pids);
  winBegin = now();
  winEnd = winBegin + o.duration * 1000;
  phase = 'window';
  await sleep(o.duration * 1000);
  const cpu1 = cpuSample(o.pids);
  const winActualEnd = Math.max(now(), winEnd);
  phase = 'stop';
  // Workers finish their pair in flight; one stuck past the grace counts as an error.
  await Promise.race([Promise.all(running), sleep(o.grace * 1000)]);
  const stuck = finished.filter((f) => !f).length;
  if (stuck > 0) {
    errors.stuck = stuck;
    if (!firstError) firstError = `${stuck} workers still in a call ${o.grace} s after the window`;
  }
  if (firstErrorPending) await Promise.race([firstErrorPending, sleep(1000)]);
  await Promise.race([peer.close().catch(() => {}), sleep(3000)]);

  const seconds = (winActualEnd - winBegin) / 1000;
  lat.sort((a, b) => a - b);
  const pairs = lat.length;
  const errTotal = Object.values(errors).reduce((a, b) => a + b, 0);
  const r = {
    target: peer.target,
    mode: 'node',
    server: peer.server,
    threads: o.workers,
    conns: 1,
    inflight: 0,
    resources: o.resources,
    hold_us: 0,
    wait_ms: 0,
    retry_us: o.retryUs,
    warmup_s: o.warmup,
    ttl_ms: o.ttlMs,
    duration_s: o.duration,
    seconds: round(seconds, 3),
    pairs,
    pairs_per_s: round(seconds > 0 ? pairs / seconds : 0, 1),
    attempts,
    attempts_per_pair: round(pairs ? attempts / pairs : 0, 3),
    p50_us: round(quantile(lat, 0.5), 1),
    p90_us: round(quantile(lat, 0.9), 1),
    p99_us: round(quantile(lat, 0.99), 1),
    p999_us: round(quantile(lat, 0.999), 1),
    max_us: round(pairs ? lat[pairs - 1] : 0, 1),
    mean_us: round(pairs ? lat.reduce((a, b) => a + b, 0) / pairs : 0, 1),
    acquire_max_us: round(acquireMaxUs, 1),
    errors: errTotal,
  };
  for (const [k, v] of Object.entries(errors)) r[`errors_${k}`] = v;
  if (errTotal && firstError) r.first_error = firstError;
  r.worker_pairs_min = Math.min(...perWorker);
  r.worker_pairs_max = Math.max(...perWorker);
  r.workers_starved = perWorker.filter((n) => n === 0).length;
  for (const who of ['client', 'rlockd', 'redis', 'etcd']) {
    if (!(who in cpu0)) continue;
    const known = cpu0[who] !== null && cpu1[who] !== null;
    const us = known ? cpu1[who] - cpu0[who] : 0;
    r[`cpu_${who}_pct`] = round(seconds > 0 ? us / (seconds * 1e4) : 0, 1);
    if (pairs > 0) r[`cpu_${who}_us_per_pair`] = round(us / pairs, 2);
  }
  for (const [name, pid] of Object.entries(o.pids)) r[`${name}_pid`] = pid;
  r.node = process.version;
  process.stdout.write(`${JSON.stringify(r)}\n`);
  // Sockets or timers a library left behind must not keep the process (and the script) waiting.
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`peers.js: ${e.stack || e}\n`);
  process.exit(1);
});
