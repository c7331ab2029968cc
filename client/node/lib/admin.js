// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Replies of the informational and operators' requests (docs/protocol.md
// §4.3, §9), as plain objects with camelCase names. Fences and owners are
// bigints; counters and times (ms) are Numbers.

const { fromU64, u64Number } = require('./codec');

const SESSION_STATES = ['accepted', 'active'];
const ROLES = ['open', 'client', 'admin', 'none'];

function sessionInfo(s) {
  return {
    sessionId: s.session_id,
    clientName: s.client_name,
    peer: s.peer,
    state: SESSION_STATES[s.state] ?? String(s.state),
    role: ROLES[s.role] ?? String(s.role),
    connectedAt: u64Number(s.connected_at_ms),
    idleMs: u64Number(s.idle_ms),
    locksHeld: s.locks_held,
    waiting: s.waiting,
    inFlight: s.in_flight,
    requestedTimeoutMs: s.requested_timeout_ms,
    timeoutMs: s.timeout_ms,
    resumed: s.resumed,
  };
}

function lockInfo(l) {
  return {
    resource: l.resource,
    sessionId: l.session_id,
    clientName: l.client_name,
    owner: fromU64(l.owner),
    fence: fromU64(l.fence),
    token: l.token,
    acquiredAt: u64Number(l.acquired_at_ms),
    ttlMs: l.ttl_ms,
    ttlLeftMs: l.ttl_left_ms,
    watchdog: l.watchdog,
    holdCount: l.hold_count,
    waiters: l.waiters,
    shared: l.mode === 1, // LockInfo.mode MODE_SHARED: one of the resource's shared holders
    limit: l.limit || 0,  // a semaphore's limit (listed once per holding session); 0: a lock
    permits: l.permits || 0, // the permits this holder has
  };
}

function stats(r) {
  return {
    sessions: u64Number(r.sessions),
    heldLocks: u64Number(r.held_locks),
    waiters: u64Number(r.waiters),
    redisConnections: r.redis_connections,
    redisConnectionsReady: r.redis_connections_ready,
    redisUp: r.redis_up,
    scriptReloads: u64Number(r.script_reloads),
    acquires: u64Number(r.acquires),
    grants: u64Number(r.grants),
    locksLost: u64Number(r.locks_lost),
    redisErrors: u64Number(r.redis_errors),
    uptimeMs: u64Number(r.uptime_ms),
    serverVersion: r.server_version,
    metrics: (r.metrics || []).map((m) => ({ name: m.name, labels: m.labels, value: m.value })),
  };
}

// ServerInfoReply: every field, renamed from snake_case to camelCase
// (uint64 counters as Numbers).
function serverInfo(r) {
  const out = {};
  for (const f of r.$type.fieldsArray) {
    const v = r[f.name];
    const key = f.name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
    out[key] = f.type === 'uint64' ? u64Number(v) : v;
  }
  return out;
}

function forceRelease(r) {
  return {
    sessionId: r.session_id,
    clientName: r.client_name,
    owner: fromU64(r.owner),
    fence: fromU64(r.fence),
    waiters: r.waiters,
  };
}

function killSession(r) {
  return { locksReleased: r.locks_released, requestsDropped: r.requests_dropped };
}

module.exports = { sessionInfo, lockInfo, stats, serverInfo, forceRelease, killSession };
