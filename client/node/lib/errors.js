// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Errors of the client. `code` is the daemon's status name (docs/protocol.md §5)
// when the daemon said no, or one of the client's own codes below.

const { fromU64, u64Number } = require('./codec');

// Status values of rlock.v1.Status, by number.
const STATUS_NAMES = Object.freeze([
  'OK', 'NOT_ACQUIRED', 'TIMEOUT', 'NOT_HELD', 'INVALID', 'UNAUTHENTICATED',
  'PERMISSION_DENIED', 'LIMIT_EXCEEDED', 'UNAVAILABLE', 'SHUTTING_DOWN', 'INTERNAL',
  'CANCELLED', 'ALREADY_HELD', 'NOT_FOUND', 'WRONG_KIND', 'DEADLOCK',
]);

// Codes the client raises itself.
const CLIENT_CODES = Object.freeze({
  CLOSED: 'CLOSED',       // the session has ended (the message says why)
  DEADLINE: 'DEADLINE',   // no answer in time: outcome unknown, the session was closed
  PROTOCOL: 'PROTOCOL',   // the daemon sent something this client cannot read
  CONNECT: 'CONNECT',     // no address accepted a connection and a Hello
  LOCK_LOST: 'LOCK_LOST', // a held lock was lost (lostReason says why)
  UNCERTAIN: 'UNCERTAIN', // a held lock's validity passed with no answer vouching for it
});

// rlock.v1.LostReason by number, as the client names them (Lock.lostReason).
const LOST_REASONS = Object.freeze([
  'unspecified', 'expired', 'stolen', 'missing', 'forced', 'session', 'max_hold',
]);

class RlockError extends Error {
  /**
   * @param {string} code a status name or a client code
   * @param {string} message
   * @param {{retryAfter?: number, lostReason?: string, resource?: string, holder?: object,
   *   cause?: unknown}} [extra]
   */
  constructor(code, message, extra = {}) {
    super(message, extra.cause !== undefined ? { cause: extra.cause } : undefined);
    this.name = 'RlockError';
    this.code = code;
    if (extra.retryAfter) this.retryAfter = extra.retryAfter;
    if (extra.lostReason !== undefined) this.lostReason = extra.lostReason;
    if (extra.resource !== undefined) this.resource = extra.resource;
    if (extra.holder !== undefined) this.holder = extra.holder;
  }
}

// An acquire withdrawn through its AbortSignal. It is an RlockError (code
// CANCELLED) named AbortError, so that code testing either convention sees it.
class RlockAbortError extends RlockError {
  constructor(message, cause) {
    super('CANCELLED', message, { cause });
    this.name = 'AbortError';
  }
}

function statusName(status) {
  return STATUS_NAMES[status] ?? `STATUS_${status}`;
}

// Response.holder (docs/protocol.md §6.1): who holds the lock an acquire did not get.
function holderInfo(h) {
  if (!h.here) return { here: false, foreign: !!h.foreign, ttlLeftMs: h.ttl_left_ms || 0 };
  return {
    here: true,
    sessionId: h.session_id,
    clientName: h.client_name,
    owner: fromU64(h.owner),
    shared: h.mode === 1,
    limit: h.limit || 0,
    permits: h.permits || 0,
    since: u64Number(h.since_ms), // the daemon's wall clock at the grant, ms since the epoch
    holders: h.holders || 1,      // sessions of that daemon holding it; this is the first
    ttlLeftMs: h.ttl_left_ms || 0,
  };
}

// The holder in words, as librlock says it.
function holderWords(h) {
  if (!h.here) {
    const who = h.foreign ? ' (not by rlockd)' : '';
    return h.ttlLeftMs > 0 ? `held outside this daemon${who}, ttl left ${h.ttlLeftMs} ms`
      : `held outside this daemon${who}, ttl left not known`;
  }
  const kind = h.limit > 0 ? `, ${h.permits} of ${h.limit} permits` : h.shared ? ', shared' : '';
  const more = h.holders > 1 ? `, first of ${h.holders} sessions here` : '';
  const since = new Date(h.since).toISOString().replace(/\.\d+Z$/, 'Z');
  return `held by session ${h.sessionId} (client ${JSON.stringify(h.clientName)}, owner ${h.owner}` +
    `${kind}${more}) since ${since}, ${h.ttlLeftMs} ms left`;
}

// The error for a non-OK Response.
function fromResponse(resp, what) {
  const name = statusName(resp.status);
  if (STATUS_NAMES[resp.status] === undefined) {
    return new RlockError('PROTOCOL', `${what}: unknown status ${resp.status} from the daemon`);
  }
  let detail = resp.message ? resp.message : name.toLowerCase().replace(/_/g, ' ');
  const holder = resp.holder ? holderInfo(resp.holder) : undefined;
  if (holder) detail += `; ${holderWords(holder)}`;
  return new RlockError(name, `${what}: ${name}: ${detail}`, { retryAfter: resp.retry_after_ms, holder });
}

function lostReasonName(n) {
  return LOST_REASONS[n] ?? 'unspecified';
}

module.exports = {
  RlockError, RlockAbortError, STATUS_NAMES, CLIENT_CODES, LOST_REASONS,
  statusName, fromResponse, lostReasonName,
};
