// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Leader elections (docs/protocol.md §6.11): a campaign's value, the leader as
// the daemon reports it, and observing an election. A campaign itself is an
// Acquire (lib/client.js) and its grant a Leadership (lib/locks.js).
//
// Observing: the daemon subscribes a session to an election (Observe) and
// pushes each change as a LeaderChanged event, in order of terms. A client
// keeps one subscription per election, a Watch, however many Observers the
// application made on it: the first one subscribes, the last one to stop
// ends the subscription, and those between start from what the Watch knows.

const { EventEmitter } = require('node:events');
const { setTimeout: sleep } = require('node:timers/promises');
const { fromU64 } = require('./codec');
const { emitLater } = require('./locks');

// Acquire.value: at most this many bytes of UTF-8, no NUL.
const VALUE_MAX_BYTES = 1024;

// An Observe refused after a move is sent again after a pause: the first, doubling up
// to the longest (the daemon's retryAfter, when longer, up to that).
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 2000;
// Refusals another try may cure. LIMIT_EXCEEDED (the limit may be on reads in flight,
// which a resume sends all at once) is tried again for LIMIT_GIVE_UP_MS, then final.
const RETRIED = new Set(['UNAVAILABLE', 'SHUTTING_DOWN', 'INTERNAL', 'TIMEOUT']);
const LIMIT_GIVE_UP_MS = 5000;

/** Throws unless `value` can be a candidate's value. */
function checkValue(value) {
  if (typeof value !== 'string') throw new TypeError(`value must be a string, got ${typeof value}`);
  if (value.includes('\0')) throw new RangeError('value must not contain NUL characters');
  if (typeof value.isWellFormed === 'function' && !value.isWellFormed()) {
    throw new RangeError('value must be well-formed Unicode (it has a lone surrogate)');
  }
  const n = Buffer.byteLength(value, 'utf8');
  if (n > VALUE_MAX_BYTES) {
    throw new RangeError(`value is ${n} bytes of UTF-8: a candidate's value is at most ${VALUE_MAX_BYTES} bytes`);
  }
}

/** {elected, term, value} of a LeaderReply or a LeaderChanged (frozen: every observer gets the same one). */
function leaderInfo(r) {
  return Object.freeze({ elected: Boolean(r.elected), term: fromU64(r.term), value: r.value || '' });
}

/** A LeaderReply, with the leader's lease left. */
function leaderReply(r) {
  return { ...leaderInfo(r), ttlMs: r.ttl_ms || 0 };
}

/**
 * Whether `next` tells an observer something `cur` did not: a later term, or
 * the same term's leader gone. Anything else repeats or predates what it knows.
 */
function isNews(next, cur) {
  if (!cur) return true;
  if (next.term !== cur.term) return next.term > cur.term;
  return cur.elected && !next.elected;
}

/** One election observed by the application; made by client.observe(). */
class Observer extends EventEmitter {
  constructor(watch, onChange) {
    super();
    this._watch = watch;
    this._leader = null;
    this._state = 'starting'; // 'starting' (until its Observe is answered) | 'observing' | 'stopped' | 'closed'
    this._stopping = null;
    if (onChange) this.on('change', onChange);
  }

  /** The election's name. */
  get resource() { return this._watch.resource; }
  /** The latest leader known: {elected, term, value}. */
  get leader() { return this._leader; }
  /**
   * 'observing', 'stopped' (stop() was called) or 'closed' (the session ended,
   * or the daemon it moved to refused to observe the election: see resubscribe).
   */
  get state() { return this._state === 'starting' ? 'observing' : this._state; }

  /**
   * Stops observing. Resolves once the daemon has ended the session's
   * subscription (when this was the client's last observer of the election).
   * No 'change' is emitted after stop() was called.
   */
  stop(opts = {}) {
    if (!this._stopping) {
      if (this._state === 'observing' || this._state === 'starting') this._state = 'stopped';
      this._stopping = this._watch.leave(this, opts);
    }
    return this._stopping;
  }

  /** A change reached the client (after the ones before it). */
  _change(info) {
    if (this._state !== 'observing') return;
    this._leader = info;
    // Like emitLater (lib/locks.js), but none once stop() was called meanwhile.
    process.nextTick(() => {
      if (this._state === 'observing') this.emit('change', info);
    });
  }

  /** The observation ended: nothing more comes. err: why (null after client.close()). */
  _close(err) {
    if (this._state !== 'observing' && this._state !== 'starting') return;
    this._state = 'closed';
    emitLater(this, 'close', err);
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Observer.prototype[Symbol.asyncDispose] = function dispose() {
    return this.stop();
  };
}

/** The session's subscription to one election, shared by the client's observers of it. */
class Watch {
  constructor(client, resource) {
    this.client = client;
    this.resource = resource;
    this.observers = new Set();
    this.active = false;      // the daemon has subscribed the session (Observe answered)
    this.subscribing = false; // an Observe is on its way: changes wait in `early`
    this.early = [];
    this.state = null;        // the latest leader known
    this.queue = Promise.resolve();
    this.busy = 0;            // steps queued or running
  }

  /** Runs fn after the steps queued before it (subscribe, unsubscribe, resubscribe). */
  serial(fn) {
    this.busy++;
    const p = this.queue.then(fn).finally(() => {
      this.busy--;
      this.forgetIfIdle();
    });
    this.queue = p.catch(() => {});
    return p;
  }

  forgetIfIdle() {
    const m = this.client._watches;
    if (this.busy === 0 && this.observers.size === 0 && !this.active && m.get(this.resource) === this) {
      m.delete(this.resource);
    }
  }

  /** Sends Observe; resolves with the LeaderReply. */
  observe(stop, opts) {
    const c = this.client;
    return c._engine.call('observe', { resource: this.resource, stop }, c.timeoutFor(opts),
      `${stop ? 'stop observing' : 'observe'} ${this.resource}`);
  }

  /** Adds an observer, subscribing the session first if it is not yet. */
  join(obs, opts) {
    return this.serial(async () => {
      if (!this.active) {
        this.subscribing = true;
        this.early = [];
        let reply;
        try {
          reply = await this.observe(false, opts);
        } finally {
          this.subscribing = false;
        }
        this.active = true;
        this.state = leaderInfo(reply);
        const early = this.early;
        this.early = [];
        for (const info of early) this.apply(info);
      }
      obs._state = 'observing';
      obs._leader = this.state;
      this.observers.add(obs);
    });
  }

  /** Removes an observer; the last one ends the subscription. */
  leave(obs, opts) {
    this.observers.delete(obs);
    return this.serial(async () => {
      if (this.observers.size > 0 || !this.active) return;
      this.active = false;
      try {
        await this.observe(true, opts);
      } catch (e) {
        // A session that ended, or is moving (the new connection is not
        // subscribed again), observes nothing any more; NOT_HELD: the daemon
        // had no subscription to end.
        if (!['CLOSED', 'DEADLINE', 'UNAVAILABLE', 'NOT_HELD'].includes(e.code)) throw e;
      }
    });
  }

  /** A LeaderChanged for this election. */
  event(info) {
    if (this.subscribing) this.early.push(info);
    else if (this.active) this.apply(info);
  }

  apply(info) {
    if (!isNews(info, this.state)) return;
    this.state = info;
    for (const obs of this.observers) obs._change(info);
  }

  /**
   * The session moved to another connection (lib/move.js), maybe to another
   * daemon, which knows nothing of its subscriptions: subscribe again (an
   * Observe of an election observed already just answers). The reply
   * reports what changed meanwhile (changes in between may be skipped: the
   * terms show it). A refusal is tried again after a pause (100 ms, doubling
   * up to 2 s) until the daemon observes the election, the last observer
   * stops or the session ends; one that trying again does not cure (and
   * LIMIT_EXCEEDED after 5 s of it) ends the observation: each observer is
   * closed with the error.
   */
  resubscribe() {
    return this.serial(async () => {
      let pause = 0;
      let limitedSince = 0;
      for (;;) {
        if (!this.active || this.observers.size === 0) return; // stop() ends it next
        let reply;
        try {
          reply = await this.observe(false, {});
        } catch (e) {
          // Moving again (SHUTTING_DOWN starts a move, too): the next resume
          // subscribes again. Ended: the session's end closes the observers.
          if (this.client.moving) return;
          if (e.code === 'CLOSED' || e.code === 'DEADLINE') return;
          let again = RETRIED.has(e.code);
          if (e.code === 'LIMIT_EXCEEDED') {
            if (!limitedSince) limitedSince = Date.now();
            again = Date.now() - limitedSince < LIMIT_GIVE_UP_MS;
          } else {
            limitedSince = 0;
          }
          if (!again) {
            this.active = false;
            for (const obs of [...this.observers]) obs._close(e);
            this.observers.clear();
            return;
          }
          pause = Math.min(pause ? pause * 2 : RETRY_FIRST_MS, RETRY_MAX_MS);
          await sleep(Math.max(pause, Math.min(e.retryAfter || 0, RETRY_MAX_MS)), undefined, { ref: false });
          continue;
        }
        this.apply(leaderInfo(reply));
        return;
      }
    });
  }

  /** The session ended. */
  close(err) {
    this.active = false;
    for (const obs of [...this.observers]) obs._close(err);
    this.observers.clear();
  }
}

module.exports = {
  VALUE_MAX_BYTES, checkValue, leaderInfo, leaderReply, isNews, Observer, Watch,
};
