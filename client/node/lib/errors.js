// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Errors of the client. `code` is the daemon's status name (docs/protocol.md §5)
// when the daemon said no, or one of the client's own codes below.

// Status values of rlock.v1.Status, by number.
const STATUS_NAMES = Object.freeze([
  'OK', 'NOT_ACQUIRED', 'TIMEOUT', 'NOT_HELD', 'INVALID', 'UNAUTHENTICATED',
  'PERMISSION_DENIED', 'LIMIT_EXCEEDED', 'UNAVAILABLE', 'SHUTTING_DOWN', 'INTERNAL',
  'CANCELLED', 'ALREADY_HELD', 'NOT_FOUND', 'WRONG_KIND',
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
   * @param {{retryAfter?: number, lostReason?: string, resource?: string, cause?: unknown}} [extra]
   */
  constructor(code, message, extra = {}) {
    super(message, extra.cause !== undefined ? { cause: extra.cause } : undefined);
    this.name = 'RlockError';
    this.code = code;
    if (extra.retryAfter) this.retryAfter = extra.retryAfter;
    if (extra.lostReason !== undefined) this.lostReason = extra.lostReason;
    if (extra.resource !== undefined) this.resource = extra.resource;
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

// The error for a non-OK Response.
function fromResponse(resp, what) {
  const name = statusName(resp.status);
  if (STATUS_NAMES[resp.status] === undefined) {
    return new RlockError('PROTOCOL', `${what}: unknown status ${resp.status} from the daemon`);
  }
  const detail = resp.message ? resp.message : name.toLowerCase().replace(/_/g, ' ');
  return new RlockError(name, `${what}: ${name}: ${detail}`, { retryAfter: resp.retry_after_ms });
}

function lostReasonName(n) {
  return LOST_REASONS[n] ?? 'unspecified';
}

module.exports = {
  RlockError, RlockAbortError, STATUS_NAMES, CLIENT_CODES, LOST_REASONS,
  statusName, fromResponse, lostReasonName,
};
