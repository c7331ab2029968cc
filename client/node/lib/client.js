// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The client: one session on one connection. Acquire, using, elections
// (campaign, lead, leader, observe), the informational and operators'
// requests, close.

const path = require('node:path');
const { EventEmitter } = require('node:events');
const { Engine, now } = require('./engine');
const {
  Grant, Lock, Leadership, checkMs, emitLater,
} = require('./locks');
const {
  checkValue, leaderReply, leaderInfo, Observer, Watch,
} = require('./elect');
const { connectAny } = require('./connection');
const { Mover } = require('./move');
const { parseServers } = require('./address');
const { toU64, u64Number } = require('./codec');
const { RlockError, RlockAbortError } = require('./errors');
const admin = require('./admin');

const DEFAULT_TIMEOUT_MS = 10000;
const DEFAULT_CONNECT_TIMEOUT_MS = 5000;
const DEFAULT_CLOSE_TIMEOUT_MS = 5000;

// Owners the client picks itself carry the top bit; an explicit owner must be
// below it, so the two kinds never meet.
const AUTO_OWNER_BIT = 1n << 63n;
// The most resources acquireAll takes at once (RLOCK_ACQUIRE_ALL_MAX of the C client).
const ACQUIRE_ALL_MAX = 16;
// rlock.v1.LockMode: Acquire.mode, AcquireReply.mode.
const MODE_EXCLUSIVE = 0;
const MODE_SHARED = 1;
// The largest semaphore (Acquire.limit) the daemon accepts.
const SEMAPHORE_LIMIT_MAX = 1000000;

function defaultName() {
  const script = process.argv[1] ? path.basename(process.argv[1]) : 'node';
  return `${script}[${process.pid}]`.slice(0, 128);
}

function checkOwner(owner) {
  const b = typeof owner === 'bigint' ? owner : Number.isSafeInteger(owner) ? BigInt(owner) : -1n;
  if (b < 0n || b >= AUTO_OWNER_BIT) {
    throw new RangeError(`owner must be a non-negative integer below 2^63, got ${owner}`);
  }
  return b;
}

/**
 * The semaphore options of an acquire: {limit, permits}, both 0 for a lock.
 * limit 1..1000000 makes the resource a semaphore; permits (default 1) is
 * 1..limit and needs limit; a semaphore is never shared.
 */
// The daemon logs a trace id as it is: at most 128 bytes of printable ASCII without space,
// quote or backslash (docs/protocol.md §6.12). undefined or '': none.
const TRACE_ID_MAX = 128;
function checkTraceId(id) {
  if (id === undefined || id === '') return '';
  if (typeof id !== 'string') throw new TypeError(`traceId must be a string, got ${typeof id}`);
  if (id.length > TRACE_ID_MAX || !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(id)) {
    throw new RangeError(
      `traceId must be 1 to ${TRACE_ID_MAX} printable ASCII characters without space, quote or backslash`);
  }
  return id;
}

function checkSemaphore(opts) {
  const { limit, permits } = opts;
  if (limit === undefined) {
    if (permits !== undefined) throw new TypeError('permits needs limit (permits are taken from a semaphore)');
    return { limit: 0, permits: 0 };
  }
  if (typeof limit !== 'number') throw new TypeError(`limit must be a number, got ${typeof limit}`);
  if (!Number.isInteger(limit) || limit < 1 || limit > SEMAPHORE_LIMIT_MAX) {
    throw new RangeError(`limit must be an integer 1 .. ${SEMAPHORE_LIMIT_MAX}, got ${limit}`);
  }
  if (opts.shared === true) throw new TypeError('a semaphore (limit) cannot be shared');
  if (permits === undefined) return { limit, permits: 1 };
  if (typeof permits !== 'number') throw new TypeError(`permits must be a number, got ${typeof permits}`);
  if (!Number.isInteger(permits) || permits < 1 || permits > limit) {
    throw new RangeError(`permits must be an integer 1 .. limit (${limit}), got ${permits}`);
  }
  return { limit, permits };
}

function abortError(signal, resource, what = 'acquire') {
  return new RlockAbortError(`${what} ${resource}: aborted`, signal.reason);
}

function checkResource(resource) {
  if (typeof resource !== 'string' || resource === '') {
    throw new TypeError('resource must be a non-empty string');
  }
}

/** A campaign is an exclusive lock: no shared, limit or permits. */
function checkCampaignOptions(opts) {
  for (const k of ['shared', 'limit', 'permits']) {
    if (opts[k] !== undefined && !(k === 'shared' && opts[k] === false)) {
      throw new TypeError(`a campaign is an exclusive lock: option ${k} is not allowed`);
    }
  }
}

// An acquireAll entry given as an object: its name and its own kind (the other options
// are the call's). Only the kind's fields are taken from it.
function kindOf(entry) {
  if (entry === null || typeof entry !== 'object') {
    throw new TypeError('an acquireAll entry is a name or { name, shared, limit, permits }');
  }
  if (entry.shared !== undefined && typeof entry.shared !== 'boolean') {
    throw new TypeError(`shared must be a boolean, got ${typeof entry.shared}`);
  }
  return { shared: entry.shared ?? false, limit: entry.limit, permits: entry.permits };
}

class Client extends EventEmitter {
  constructor(options, link) {
    super();
    this._options = options;
    this._timeout = options.timeout;
    this._ownerSeq = 0n;
    this._closing = null;
    this._watches = new Map(); // election -> Watch (lib/elect.js)
    this.address = link.addr.text;
    const hooks = {
      onLost: (lock, err) => emitLater(this, 'lost', lock, err),
      onClose: (err) => {
        const watches = [...this._watches.values()];
        this._watches.clear();
        for (const w of watches) w.close(err);
        emitLater(this, 'close', err);
      },
      onEnd: () => this._mover && this._mover.stop(),
      onLeader: (ev) => {
        const w = this._watches.get(ev.resource);
        if (w) w.event(leaderInfo(ev));
      },
    };
    if (options.resume) {
      hooks.onMove = (why, kind) => {
        const began = this._mover.begin(why, kind);
        if (began && !this._moveAnnounced) {
          this._moveAnnounced = true;
          emitLater(this, 'moving', why);
        }
        return began;
      };
    }
    this._engine = new Engine(link, link.response.hello, hooks);
    this._mover = new Mover(this._engine, {
      servers: options.servers,
      tls: options.tls,
      hello: link.hello,
      onResumed: () => {
        this._moveAnnounced = false;
        this.address = this._engine.link.addr.text;
        for (const w of this._watches.values()) w.resubscribe();
        emitLater(this, 'resumed');
      },
    });
  }

  /** Times the session moved to another connection and resumed there. */
  get resumes() { return this._mover.resumes; }
  /** True while the session moves to another connection (calls fail UNAVAILABLE meanwhile). */
  get moving() { return Boolean(this._engine.moving); }

  get sessionId() { return this._engine.sessionId; }
  get serverVersion() { return this._engine.serverVersion; }
  /** The effective session timeout (ms), as the daemon granted it. */
  get sessionTimeout() { return this._engine.sessionTimeout; }
  /** True once the session has ended, whatever ended it. */
  get closed() {
    this._engine.check();
    return this._engine.state === 'ended';
  }
  /** Why the session ended (an RlockError), or null while it is open. */
  get closeReason() { return this._engine.endError; }

  timeoutFor(opts) {
    const t = opts && opts.timeout !== undefined ? opts.timeout : this._timeout;
    checkMs('timeout', t);
    if (t === 0) throw new RangeError('timeout must be > 0');
    return t;
  }

  nextOwner() {
    this._ownerSeq += 1n;
    return AUTO_OWNER_BIT | this._ownerSeq;
  }

  /**
   * Takes a lock. Resolves with a Lock (one hold); rejects with an RlockError
   * (NOT_ACQUIRED, TIMEOUT, ...), or an abort error when opts.signal fired.
   */
  acquire(resource, opts = {}) {
    return this.acquireAs(resource, opts, undefined);
  }

  /**
   * acquire() with the owner set (acquireAll's one owner for the set);
   * undefined: as acquire. campaign: {value} for a campaign (its value checked).
   */
  acquireAs(resource, opts, setOwner, campaign) {
    return new Promise((resolve, reject) => {
      checkResource(resource);
      const ttl = opts.ttl ?? 0;
      const wait = opts.wait ?? 0;
      const maxHold = opts.maxHold ?? 0;
      const lockDelay = opts.lockDelay ?? 0;
      checkMs('ttl', ttl);
      checkMs('wait', wait);
      checkMs('maxHold', maxHold);
      checkMs('lockDelay', lockDelay);
      if (opts.shared !== undefined && typeof opts.shared !== 'boolean') {
        throw new TypeError(`shared must be a boolean, got ${typeof opts.shared}`);
      }
      const sem = checkSemaphore(opts);
      const traceId = checkTraceId(opts.traceId);
      // setOwner: acquireAll's one owner for the set, checked there (it may be the client's own).
      const owner = setOwner ?? (opts.owner !== undefined ? checkOwner(opts.owner) : this.nextOwner());
      const { signal } = opts;
      const what = campaign ? 'campaign' : 'acquire';
      if (signal && signal.aborted) throw abortError(signal, resource, what);
      const e = this._engine;
      // The daemon caps the wait at its max_wait (0: waiting disabled).
      const timeout = Math.min(wait, e.maxWait) + this.timeoutFor(opts);

      let call = null;
      const onAbort = () => {
        // Withdraw it; the Acquire still gets exactly one answer, which settles this promise.
        if (!call || call.cancelled || e.pending.get(call.id) !== call) return;
        call.cancelled = true;
        e.send('cancel', { request_id: call.id }, this._timeout, () => {}, `cancel of acquire ${resource}`);
      };
      const body = {
        resource,
        ttl_ms: ttl,
        wait_ms: wait,
        watchdog_off: opts.watchdog === false,
        owner: toU64(owner),
        no_reentry: opts.reentry === false,
        max_hold_ms: maxHold,
        lock_delay_ms: lockDelay,
        mode: opts.shared ? MODE_SHARED : MODE_EXCLUSIVE,
        limit: sem.limit,
        permits: sem.permits,
        trace_id: traceId,
      };
      if (campaign) {
        body.campaign = true;
        body.value = campaign.value;
      }
      call = e.send('acquire', body, timeout, (err, reply, c) => {
        if (signal) signal.removeEventListener('abort', onAbort);
        if (c && c.cancelled) {
          // A grant that crossed the Cancel on the wire is ours: give it back at once.
          if (!err) this.giveBack(resource, reply.token, c.id);
          reject(abortError(signal, resource, what));
          return;
        }
        if (err) {
          reject(err);
          return;
        }
        try {
          resolve(this.granted(resource, owner, reply, c.sentAt, campaign));
        } catch (ex) {
          reject(ex);
        }
      }, `${what} ${resource}`);
      if (call && signal) signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  granted(resource, owner, reply, sentAt, campaign) {
    const e = this._engine;
    if (!reply.token) {
      e.end('PROTOCOL', 'an acquire was granted without a token');
      throw new RlockError('PROTOCOL', `acquire ${resource}: granted without a token`);
    }
    let g = e.grants.get(reply.token);
    if (g) {
      g.update(reply, sentAt); // a re-entry: the same grant, one hold more
    } else {
      g = new Grant(e, resource, owner, reply, sentAt);
      if (campaign) {
        g.campaign = true;
        g.value = campaign.value;
      }
      e.addGrant(g);
    }
    return g.campaign ? new Leadership(this, g, owner) : new Lock(this, g, owner);
  }

  giveBack(resource, token, acquireId) {
    const call = this._engine.send('release', { resource, token }, this._timeout, (err, reply) => {
      const g = this._engine.grants.get(token);
      if (!err && g) g.released(reply.hold_count);
    }, `release of ${resource} (a grant that raced its cancel)`);
    // If the session moves before the answer, the resume releases it by the acquire's id.
    if (call) call.acquireId = acquireId;
  }

  /** Resolves once a move under way has ended (resumed, or the session ended). */
  moveSettled() {
    return new Promise((resolve) => {
      const done = () => {
        this.off('resumed', done);
        this.off('close', done);
        resolve();
      };
      this.on('resumed', done);
      this.on('close', done);
      if (!this.moving) done();
    });
  }

  /** Releases a lock for using(): after a move if one is under way. The error, or null. */
  async releaseFinally(lock) {
    for (;;) {
      const s = lock.state;
      if (s !== 'held' && s !== 'uncertain') return null;
      try {
        await lock.release();
        return null;
      } catch (e) {
        if (e.code === 'NOT_HELD') return null;
        if (e.code !== 'UNAVAILABLE' || !this.moving) return e;
      }
      await this.moveSettled();
    }
  }

  /**
   * Acquires every one of `entries` (1 to 16 different names) or none:
   * taken one at a time in the byte order of their names (the C client's
   * order too), so that callers naming them in other orders never deadlock.
   * opts.wait is one budget for the set; the other options apply to each
   * lock, with one owner for all of them. Resolves with the locks in the
   * order of `resources`. On failure what was taken is released again and the
   * error (its `resource` names the lock that stopped it) is thrown; a lock
   * lost while a later one was awaited fails the call with NOT_ACQUIRED.
   * opts.shared takes every one of them shared; opts.limit (and permits)
   * takes permits of every one of them as a semaphore of that limit. An entry
   * may also be `{ name, shared, limit, permits }`: that one is taken in its
   * own kind (C: rlock_acquire_all_kinds); the one order of names keeps any
   * mix of kinds deadlock-free.
   */
  async acquireAll(entries, opts = {}) {
    if (!Array.isArray(entries) || entries.length < 1 || entries.length > ACQUIRE_ALL_MAX) {
      throw new TypeError(`acquireAll: between 1 and ${ACQUIRE_ALL_MAX} resources`);
    }
    const kinds = entries.map((r) => (typeof r === 'string' ? null : kindOf(r)));
    const resources = entries.map((r) => (typeof r === 'string' ? r : r.name));
    for (const r of resources) {
      if (typeof r !== 'string' || r === '') throw new TypeError('resource must be a non-empty string');
    }
    const order = resources.map((r, i) => i)
      .sort((x, y) => Buffer.compare(Buffer.from(resources[x]), Buffer.from(resources[y])));
    for (let k = 1; k < order.length; k++) {
      if (resources[order[k]] === resources[order[k - 1]]) {
        throw new TypeError(`acquireAll: '${resources[order[k]]}' is named twice`);
      }
    }
    const wait = opts.wait ?? 0;
    checkMs('wait', wait);
    if (opts.shared !== undefined && typeof opts.shared !== 'boolean') {
      throw new TypeError(`shared must be a boolean, got ${typeof opts.shared}`);
    }
    checkSemaphore(opts); // before anything is taken
    for (const k of kinds) if (k) checkSemaphore({ ...opts, ...k });
    const owner = opts.owner !== undefined ? checkOwner(opts.owner) : this.nextOwner();
    const deadline = now() + wait;
    const out = new Array(resources.length).fill(null);
    const taken = [];
    const rollBack = async () => {
      for (const i of taken.reverse()) await this.releaseFinally(out[i]);
    };
    try {
      for (const i of order) {
        // A spent budget still asks (a free lock is granted) with the shortest wait.
        const left = wait > 0 ? Math.max(1, Math.ceil(deadline - now())) : 0;
        try {
          out[i] = await this.acquireAs(resources[i], { ...opts, ...kinds[i], wait: left }, owner);
        } catch (err) {
          if (err instanceof RlockError && err.resource === undefined) err.resource = resources[i];
          throw err;
        }
        taken.push(i);
      }
    } catch (err) {
      await rollBack();
      throw err;
    }
    const lost = out.find((l) => l.state === 'lost');
    if (lost) {
      await rollBack();
      throw new RlockError('NOT_ACQUIRED',
        `lock ${lost.resource} was lost while the others were awaited`, { resource: lost.resource });
    }
    return out;
  }

  /**
   * Runs fn(signal, arg) on locks already taken, releases them (even when fn
   * throws) and returns what fn returned. `signal` aborts when a lock is lost
   * or becomes uncertain (or opts.signal aborts); its reason says why. If
   * that happened while fn ran, it rejects with that reason even when fn
   * returned: its work was not protected throughout.
   */
  async guarded(locks, opts, fn, arg) {
    // The frame that granted a lock may have been followed, in the same read,
    // by one that took it away or made it uncertain: fn runs only on locks
    // held when it starts.
    const notHeld = locks.find((l) => l.state !== 'held');
    if (notHeld) {
      const g = notHeld._grant;
      const err = notHeld.state === 'lost' ? g.lostError(g.lostReason, 'before the function could start')
        : new RlockError('UNCERTAIN', `lock ${notHeld.resource} was uncertain before the function could start`,
          { resource: notHeld.resource });
      let releaseError = null;
      for (const l of [...locks].reverse()) releaseError = (await this.releaseFinally(l)) || releaseError;
      throw releaseError || err;
    }
    const ac = new AbortController();
    let trouble = null;
    const watch = (kind, err) => {
      if (!trouble) trouble = err;
      ac.abort(err);
    };
    for (const l of locks) l._grant.watchers.add(watch);
    const outer = opts.signal;
    const onOuter = () => ac.abort(outer.reason);
    if (outer) outer.addEventListener('abort', onOuter, { once: true });

    let result;
    let failed = false;
    let error;
    try {
      result = await fn(ac.signal, arg);
    } catch (e) {
      failed = true;
      error = e;
    } finally {
      for (const l of locks) l._grant.watchers.delete(watch);
      if (outer) outer.removeEventListener('abort', onOuter);
    }
    let releaseError = null;
    for (const l of [...locks].reverse()) releaseError = (await this.releaseFinally(l)) || releaseError;
    if (failed) throw error;
    if (trouble) throw trouble;
    if (releaseError) throw releaseError;
    return result;
  }

  /**
   * Acquires `resource`, runs fn(signal, lock), releases the lock (even when
   * fn throws) and returns what fn returned. `signal` aborts when the lock is
   * lost or becomes uncertain (or opts.signal aborts); its reason says why.
   * If that happened while fn ran, using rejects with that reason even when
   * fn returned: its work was not protected throughout.
   */
  async using(resource, opts, fn) {
    if (typeof opts === 'function') {
      fn = opts;
      opts = {};
    }
    if (typeof fn !== 'function') throw new TypeError('using(resource, [opts], fn): fn must be a function');
    const lock = await this.acquire(resource, opts);
    return this.guarded([lock], opts, fn, lock);
  }

  /** using() for several locks at once (acquireAll): fn(signal, locks), locks in the order given. */
  async usingAll(resources, opts, fn) {
    if (typeof opts === 'function') {
      fn = opts;
      opts = {};
    }
    if (typeof fn !== 'function') throw new TypeError('usingAll(resources, [opts], fn): fn must be a function');
    const locks = await this.acquireAll(resources, opts);
    return this.guarded(locks, opts, fn, locks);
  }

  // --- elections (docs/protocol.md §6.11) -------------------------------------------

  /**
   * Campaigns for the election `resource` with `value` (a string of at most
   * 1024 bytes of UTF-8, no NUL): an exclusive acquire whose grant also makes
   * `value` the leader's. Resolves with a Leadership (a Lock: `term` is its
   * fence; release() or resign() steps down; its loss is reported like any
   * lock's). Options as acquire() without shared, limit and permits; `wait`
   * 0 (the default) tries once (NOT_ACQUIRED while another candidate leads).
   */
  campaign(resource, value, opts = {}) {
    return new Promise((resolve) => {
      checkResource(resource);
      checkValue(value);
      checkCampaignOptions(opts);
      resolve(this.acquireAs(resource, opts, undefined, { value }));
    });
  }

  /**
   * Campaigns (as campaign()), runs fn(signal, leadership) while leading,
   * resigns (even when fn throws) and returns what fn returned. `signal`
   * aborts when the leadership is lost or becomes uncertain (or opts.signal
   * aborts); lead then rejects with its reason, even when fn returned.
   */
  async lead(resource, value, opts, fn) {
    if (typeof opts === 'function') {
      fn = opts;
      opts = {};
    }
    if (typeof fn !== 'function') throw new TypeError('lead(resource, value, [opts], fn): fn must be a function');
    const leadership = await this.campaign(resource, value, opts);
    return this.guarded([leadership], opts, fn, leadership);
  }

  /**
   * Who leads the election `resource` now, as Redis says (any daemon's
   * candidates count): {elected, term, value, ttlMs}; term 0n when none leads.
   */
  async leader(resource, opts = {}) {
    checkResource(resource);
    return leaderReply(await this._engine.call('leader', { resource }, this.timeoutFor(opts),
      `leader ${resource}`));
  }

  /**
   * Observes the election `resource`: resolves with an Observer whose
   * `leader` is the leader now ({elected, term, value}) and which emits
   * 'change' ({elected, term, value}) for each later change, in order of
   * terms (onChange, when given, is added as a 'change' listener), until
   * observer.stop(), or 'close' (error) when the session ends (or the daemon
   * the session moved to keeps refusing to observe it: lib/elect.js).
   */
  async observe(resource, opts, onChange) {
    if (typeof opts === 'function') {
      onChange = opts;
      opts = {};
    }
    opts = opts || {};
    checkResource(resource);
    if (onChange !== undefined && typeof onChange !== 'function') {
      throw new TypeError('observe(resource, [opts], [onChange]): onChange must be a function');
    }
    this.timeoutFor(opts);
    let w = this._watches.get(resource);
    if (!w) {
      if (!this._engine.usable()) throw this._engine.closedError();
      w = new Watch(this, resource);
      this._watches.set(resource, w);
    }
    const obs = new Observer(w, onChange);
    await w.join(obs, opts);
    return obs;
  }

  // --- the session ------------------------------------------------------------------

  /** Round trip to the daemon. Its answer also vouches for watchdog locks. */
  async ping(opts = {}) {
    const e = this._engine;
    const r = await new Promise((resolve, reject) => {
      e.send('ping', {}, this.timeoutFor(opts), (err, body, call) => {
        if (err) reject(err);
        else resolve({ body, sentAt: call.sentAt });
      });
    });
    e.vouched(r.sentAt, r.body.valid_ms);
    return { serverTime: u64Number(r.body.server_time_ms), rtt: now() - r.sentAt };
  }

  async stats(opts = {}) {
    return admin.stats(await this._engine.call('stats', {}, this.timeoutFor(opts)));
  }

  /** Says Goodbye (the daemon releases every lock at once) and resolves when the socket is closed. */
  close(opts = {}) {
    if (!this._closing) {
      const t = opts.timeout !== undefined ? this.timeoutFor(opts) : DEFAULT_CLOSE_TIMEOUT_MS;
      this._closing = this._engine.goodbye(t);
    }
    return this._closing;
  }

  // --- operators' requests (docs/protocol.md §9) ------------------------------------

  async serverInfo(opts = {}) {
    return admin.serverInfo(await this._engine.call('server_info', {}, this.timeoutFor(opts)));
  }

  /** One page of sessions: {sessions, nextCursor, total}; nextCursor '' = the last page. */
  async sessionsPage(opts = {}) {
    const r = await this._engine.call('list_sessions',
      { cursor: opts.cursor ?? '', limit: opts.limit ?? 0 }, this.timeoutFor(opts));
    return {
      sessions: r.sessions.map(admin.sessionInfo),
      nextCursor: r.next_cursor,
      total: u64Number(r.total),
    };
  }

  /** Every session of the daemon, following the cursors. */
  async sessions(opts = {}) {
    const out = [];
    let cursor = '';
    do {
      const page = await this.sessionsPage({ ...opts, cursor });
      out.push(...page.sessions);
      cursor = page.nextCursor;
    } while (cursor !== '');
    return out;
  }

  /** One page of locks: {locks, nextCursor}; it may be empty before the last page. */
  async locksPage(opts = {}) {
    const r = await this._engine.call('list_locks', {
      cursor: opts.cursor ?? '',
      limit: opts.limit ?? 0,
      prefix: opts.prefix ?? '',
      session_id: opts.sessionId ?? '',
    }, this.timeoutFor(opts));
    return { locks: r.locks.map(admin.lockInfo), nextCursor: r.next_cursor };
  }

  /** Every lock held through the daemon (filtered by prefix, sessionId), following the cursors. */
  async locks(opts = {}) {
    const out = [];
    let cursor = '';
    do {
      const page = await this.locksPage({ ...opts, cursor });
      out.push(...page.locks);
      cursor = page.nextCursor;
    } while (cursor !== '');
    return out;
  }

  /** Takes `resource` away from the session of this daemon holding it (only that grant, with token). */
  async forceRelease(resource, token = '', opts = {}) {
    if (typeof resource !== 'string' || resource === '') throw new TypeError('resource must be a non-empty string');
    return admin.forceRelease(await this._engine.call('force_release',
      { resource, token }, this.timeoutFor(opts), `forceRelease ${resource}`));
  }

  /** Ends a session of this daemon as if it had said Goodbye. */
  async killSession(sessionId, opts = {}) {
    if (typeof sessionId !== 'string' || sessionId === '') throw new TypeError('sessionId must be a non-empty string');
    return admin.killSession(await this._engine.call('kill_session',
      { session_id: sessionId }, this.timeoutFor(opts), `killSession ${sessionId}`));
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Client.prototype[Symbol.asyncDispose] = function dispose() {
    return this.close();
  };
}

function normalizeOptions(options) {
  if (!options || typeof options !== 'object') throw new TypeError('connect(options): options must be an object');
  const o = {
    servers: parseServers(options.servers),
    token: options.token ?? '',
    name: options.name ?? defaultName(),
    sessionTimeout: options.sessionTimeout ?? 0,
    connectTimeout: options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT_MS,
    timeout: options.timeout ?? DEFAULT_TIMEOUT_MS,
    tls: options.tls,
    resume: options.resume ?? true,
  };
  checkMs('sessionTimeout', o.sessionTimeout);
  checkMs('connectTimeout', o.connectTimeout);
  checkMs('timeout', o.timeout);
  if (o.timeout === 0 || o.connectTimeout === 0) throw new RangeError('timeouts must be > 0');
  if (typeof o.token !== 'string' || typeof o.name !== 'string') throw new TypeError('token and name must be strings');
  return o;
}

/** Opens a session on the first of `servers` (in a spread order) that accepts one. */
async function connect(options) {
  const o = normalizeOptions(options);
  const hello = {
    id: 1,
    hello: {
      client_name: o.name, protocol_version: 1, session_timeout_ms: o.sessionTimeout, auth_token: o.token,
    },
  };
  const link = await connectAny(o.servers, hello, { tls: o.tls, timeoutMs: o.connectTimeout });
  link.hello = hello.hello;
  return new Client(o, link);
}

module.exports = { Client, connect, DEFAULT_TIMEOUT_MS };
