// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Locks. A Grant stands for one grant the daemon made to this session (one
// token): resource, fence, owner, holds, lease and state. A Lock is what the
// application holds: one hold of a grant. A re-entry (same owner) gives a new
// Lock on the same Grant, so a loss reaches every hold at once.

const { EventEmitter } = require('node:events');
const { fromU64, u64Number } = require('./codec');
const { RlockError } = require('./errors');
const { now } = require('./engine');

const MODE_SHARED = 1; // rlock.v1.LockMode

// Events reach the application after the client has finished with the frame
// that caused them: a listener that throws cannot cut the frame's handling short.
function emitLater(emitter, ...args) {
  process.nextTick(() => emitter.emit(...args));
}

class Grant {
  constructor(engine, resource, owner, reply, sentAt) {
    this.engine = engine;
    this.resource = resource;
    this.token = reply.token;   // as granted: what the application sees, never changes
    this.wire = reply.token;    // the key's token now (an adopt after a resume changes it)
    this.fence = fromU64(reply.fence);
    this.owner = owner;
    this.watchdog = reply.watchdog;
    this.maxHoldUntil = u64Number(reply.max_hold_until_ms);
    this.lockDelay = reply.lock_delay_ms;
    // The mode held (AcquireReply.mode): shared, or exclusive — also when a
    // shared acquire re-entered its owner's exclusive hold. A grant keeps its
    // mode: the daemon neither upgrades nor downgrades one.
    this.shared = reply.mode === MODE_SHARED;
    // A semaphore's limit and the permits this grant holds (AcquireReply.limit,
    // permits); 0 and 0 for a lock. A re-entry holds the same permits.
    this.limit = reply.limit || 0;
    this.permits = reply.permits || 0;
    // A campaign's grant: the election's leadership, its value as the
    // candidate gave it (set by Client.granted); the term is the fence.
    this.campaign = false;
    this.value = null;
    this.state = 'held';        // 'held' | 'lost' | 'released'
    this.lostReason = null;
    this.handles = new Set();
    this.watchers = new Set();  // internal: (kind, err) on loss or uncertainty
    this.uncertainNotified = false;
    this.update(reply, sentAt);
  }

  /** An answer vouching for this lock (grant, re-entry, extend, adopt). */
  update(reply, sentAt) {
    if (reply.hold_count) this.holds = reply.hold_count;
    else if (this.holds === undefined) this.holds = 1;
    if (reply.ttl_ms) this.ttl = reply.ttl_ms;
    if (reply.seal !== undefined) this.seal = reply.seal;
    // The latest answer counts, not the largest bound: the daemon may have
    // shortened the lease since an earlier one.
    this.ownUntil = sentAt + reply.valid_ms;
    this.vouchSeq = this.engine.pingSeq;
    if (this.validUntil() > now()) this.uncertainNotified = false;
    this.engine.schedule();
  }

  /**
   * Until when (performance.now() ms) the lock is surely held: the latest
   * vouching answer's send time + valid_ms (a PingReply taken after this
   * lock's own latest answer speaks for a watchdog lock), never beyond the
   * session's own bound.
   */
  validUntil() {
    const e = this.engine;
    const lease = this.watchdog && e.pingSeq > this.vouchSeq ? e.wdValidUntil : this.ownUntil;
    return Math.min(lease, e.sessionBound());
  }

  lostError(reason, message) {
    const text = `lock ${this.resource} lost: ${reason.toUpperCase()}${message ? ` (${message})` : ''}`;
    return new RlockError('LOCK_LOST', text, { lostReason: reason, resource: this.resource });
  }

  /** The lock is no longer held. quiet: the application ended the session itself. */
  lose(reason, message, quiet = false) {
    if (this.state !== 'held') return;
    this.state = 'lost';
    this.lostReason = reason;
    this.engine.dropGrant(this);
    const err = this.lostError(reason, message);
    for (const w of [...this.watchers]) w('lost', err);
    if (!quiet) {
      const handles = [...this.handles];
      for (const h of handles) emitLater(h, 'lost', err);
      this.engine.hooks.onLost(handles[0], err);
    }
  }

  becameUncertain() {
    const err = new RlockError('UNCERTAIN',
      `lock ${this.resource} is uncertain: its validity passed with no answer from the daemon vouching for it`,
      { resource: this.resource });
    for (const w of [...this.watchers]) w('uncertain', err);
    for (const h of [...this.handles]) emitLater(h, 'uncertain', err);
  }

  released(holdsLeft) {
    this.holds = holdsLeft;
    if (holdsLeft === 0 && this.state === 'held') {
      this.state = 'released';
      this.engine.dropGrant(this);
    }
  }
}

/** One hold of a lock, as returned by acquire(). */
class Lock extends EventEmitter {
  constructor(client, grant, owner) {
    super();
    this._client = client;
    this._grant = grant;
    this._owner = owner;
    this._released = false; // this hold was given back
    this._releasing = false; // its release is on the way
    grant.handles.add(this);
  }

  get resource() { return this._grant.resource; }
  get token() { return this._grant.token; }
  get fence() { return this._grant.fence; }
  get owner() { return this._owner; }
  get holdCount() { return this._grant.holds; }
  get ttl() { return this._grant.ttl; }
  get watchdog() { return this._grant.watchdog; }
  /**
   * True: held shared (a read lock), false: exclusive. A shared acquire by the
   * owner holding the lock exclusive re-enters it, and that hold is exclusive.
   */
  get shared() { return this._grant.shared; }
  /** A semaphore's limit (the permits it has in all); 0: a lock. */
  get limit() { return this._grant.limit; }
  /** The permits of the semaphore this lock holds; 0: a lock. */
  get permits() { return this._grant.permits; }
  get lostReason() { return this._grant.lostReason; }

  /** 'held' | 'uncertain' | 'lost' | 'released' */
  get state() {
    if (this._released) return 'released';
    const g = this._grant;
    if (g.state === 'held') g.engine.check(); // a session gone stale ends here, on the spot
    if (g.state !== 'held') return g.state;
    if (g.engine.moving) return 'uncertain'; // held only if the new connection adopts it
    return now() >= g.validUntil() ? 'uncertain' : 'held';
  }

  /** performance.now() time until which the lock is surely held; 0 when not held. */
  get validUntil() {
    const s = this.state;
    return s === 'held' || s === 'uncertain' ? this._grant.validUntil() : 0;
  }

  /** Releases this hold. Resolves with the holds the lock has left (0: released). */
  async release(opts = {}) {
    const g = this._grant;
    if (this._released || this._releasing) {
      throw new RlockError('NOT_HELD', `release ${g.resource}: this hold was released already`);
    }
    if (g.state !== 'held') {
      throw new RlockError('NOT_HELD', `release ${g.resource}: the lock was ${g.state === 'lost' ? `lost (${g.lostReason})` : 'released'}`);
    }
    this._releasing = true;
    let reply;
    try {
      reply = await g.engine.call('release', { resource: g.resource, token: g.wire },
        this._client.timeoutFor(opts), `release ${g.resource}`);
    } catch (e) {
      // NOT_HELD: the daemon no longer knows the lock at all. Other errors
      // leave the hold as it was: still held (UNAVAILABLE while the session
      // moves), or lost with the session (CLOSED, DEADLINE).
      if (e.code === 'NOT_HELD') g.lose('unspecified', 'the daemon answered a release NOT_HELD');
      throw e;
    } finally {
      this._releasing = false;
    }
    this._released = true;
    g.handles.delete(this);
    g.released(reply.hold_count);
    return reply.hold_count;
  }

  /**
   * Renews the lease to ttl ms from now (0 or omitted: the lock's own ttl).
   * For locks taken with watchdog: false; any lock may be extended.
   */
  async extend(ttl = 0, opts = {}) {
    const g = this._grant;
    checkMs('ttl', ttl);
    if (this._released || g.state !== 'held') {
      throw new RlockError('NOT_HELD', `extend ${g.resource}: the lock is ${this.state}`);
    }
    const sent = {};
    let reply;
    try {
      reply = await new Promise((resolve, reject) => {
        g.engine.send('extend', { resource: g.resource, ttl_ms: ttl, token: g.wire },
          this._client.timeoutFor(opts), (err, body, call) => {
            if (call) sent.at = call.sentAt;
            if (err) reject(err); else resolve(body);
          }, `extend ${g.resource}`);
      });
    } catch (e) {
      if (e.code === 'NOT_HELD') g.lose('unspecified', 'the daemon answered an extend NOT_HELD');
      throw e;
    }
    if (g.state === 'held') g.update({ ttl_ms: reply.ttl_ms, valid_ms: reply.valid_ms, seal: reply.seal }, sent.at);
    return { ttl: reply.ttl_ms, validUntil: this.validUntil };
  }
}

/**
 * A campaign's grant: this client leads the election named `resource` (one
 * hold of it). `term` is the grant's fence, strictly greater than every
 * earlier leader's; release() (or resign()) steps down; a loss ends the
 * leadership as it ends any lock.
 */
class Leadership extends Lock {
  /** The leader's term: the grant's fence. */
  get term() { return this._grant.fence; }
  /** The value this candidate campaigned with (the leader's value while it leads). */
  get value() { return this._grant.value; }
  /** Steps down: release(). Resolves with the holds left (0: no longer the leader). */
  resign(opts = {}) { return this.release(opts); }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using lock = await client.acquire(...)`: released at the end of the block.
  Lock.prototype[Symbol.asyncDispose] = async function dispose() {
    const s = this.state;
    if (s === 'held' || s === 'uncertain') await this.release();
  };
}

function checkMs(name, v) {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
    throw new RangeError(`${name} must be an integer number of milliseconds (0 .. 4294967295), got ${v}`);
  }
}

module.exports = {
  Grant, Lock, Leadership, checkMs, emitLater,
};
