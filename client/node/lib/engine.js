// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The engine of one session: request ids, pending calls and their deadlines,
// the reader that routes each Response by id and each Event to the locks,
// keepalives, the validity clock, and the session's end.

const { performance } = require('node:perf_hooks');
const { FrameError, encodeFrame } = require('./framing');
const { encodeRequest, decodeServerMessage, u64Number } = require('./codec');
const {
  RlockError, fromResponse, statusName, lostReasonName,
} = require('./errors');

const now = () => performance.now();

// The body a successful answer carries, by request kind (Response oneof names).
const REPLY_BODY = {
  hello: 'hello', resume: 'hello', acquire: 'acquire', release: 'release', extend: 'extend',
  ping: 'ping', stats: 'stats', cancel: 'cancel', goodbye: null, list_sessions: 'list_sessions',
  list_locks: 'list_locks', force_release: 'force_release', kill_session: 'kill_session',
  server_info: 'server_info', adopt: 'adopt', leader: 'leader', observe: 'leader',
};

const STATUS_SHUTTING_DOWN = 9;

// Keepalives never closer together than this, whatever the ttl.
const MIN_KEEPALIVE_MS = 10;

class Engine {
  /**
   * @param {object} link {sock, reader, rest, addr}: a connection past its HelloReply
   * @param {object} hello the HelloReply
   * @param {object} hooks {onLost(lock, err), onClose(err), onEnd(), onMove(why, kind),
   *   onLeader(change)}
   */
  constructor(link, hello, hooks) {
    this.hooks = hooks;
    this.state = 'open';     // 'open' | 'ended'
    this.endError = null;    // why the session ended
    this.nextId = 2;         // 1 was the Hello
    this.pending = new Map(); // id -> call
    this.grants = new Map(); // wire token -> Grant, while held
    this.takeHello(hello);

    // The validity clock (docs/protocol.md §6.5), on performance.now().
    const t = now();
    this.lastTx = t;          // latest request queued
    this.lastRx = t;          // latest bytes from the daemon
    this.lastPing = t;        // latest keepalive sent
    this.answeredSent = t;    // send time of the latest request answered (the Hello)
    this.pingSeq = 0;         // PingReplies taken so far
    this.wdValidUntil = 0;    // what the latest PingReply vouches for watchdog locks
    this.minWdTtl = null;     // cache: shortest ttl among held watchdog locks (0 = none)

    this.timer = null;
    this.timerAt = Infinity;
    this.scheduled = false;
    this.closed = null;       // a promise that resolves when the socket is closed
    this.moving = null;       // the move under way (lib/move.js), or null
    this.attach(link);
  }

  takeHello(h) {
    this.sessionId = h.session_id;
    this.sessionSecret = h.session_secret || '';
    this.serverVersion = h.server_version;
    this.sessionTimeout = h.session_timeout_ms;
    this.maxWait = h.max_wait_ms;
    this.defaultTtl = h.default_ttl_ms;
    let ka = h.keepalive_interval_ms;
    const st = h.session_timeout_ms;
    if (st === 0 && ka === 0) ka = 1000;
    else if (st > 0 && (ka === 0 || ka > st / 2)) ka = Math.floor(st / 3);
    this.keepalive = Math.max(ka, MIN_KEEPALIVE_MS);
  }

  // --- the connection -------------------------------------------------------------

  attach(link) {
    this.link = link;
    this.daemonSaid = null; // what an id-0 answer on this connection reported
    const { sock } = link;
    this.closed = new Promise((resolve) => {
      if (sock.destroyed) resolve();
      else sock.once('close', resolve);
    });
    sock.on('data', (chunk) => this.onData(link, chunk));
    sock.on('error', (err) => this.onLinkDown(link, `connection error: ${err.message}`));
    sock.on('close', () => this.onLinkDown(link, this.daemonSaid
      ? `the daemon closed the connection (${this.daemonSaid})`
      : 'the daemon closed the connection'));
    sock.resume();
    const rest = link.rest || [];
    link.rest = [];
    for (const frame of rest) this.onFrame(frame);
    this.schedule();
  }

  onLinkDown(link, why) {
    if (link !== this.link || this.state === 'ended') return;
    this.moveOrEnd(why, 'broken');
  }

  /**
   * The connection is gone or must be left: move the session to another
   * connection when it can (lib/move.js), else end it. kind: 'broken' (the
   * connection ended), 'handover' (the daemon asked us to leave), 'silent'
   * (the daemon stopped answering: its connection is kept until the move is
   * done, so that a daemon merely stopped does not end the session meanwhile).
   * Returns true when the session ended.
   */
  moveOrEnd(why, kind) {
    if (this.hooks.onMove && this.hooks.onMove(why, kind)) return false;
    this.end('CLOSED', why);
    return true;
  }

  /** Leaves the current connection (a move begins): returns it, detached. */
  detachLink() {
    const link = this.link;
    this.link = null;
    return link;
  }

  /**
   * Fails every pending call at once (a move begins). Returns the Acquires
   * among them that were not withdrawn, which the daemon may have granted:
   * [{resource, id}].
   */
  failPending(errFor) {
    const calls = [...this.pending.values()];
    this.pending.clear();
    const acquires = [];
    for (const call of calls) {
      if (call.timer) clearTimeout(call.timer);
      if (call.kind === 'acquire') acquires.push({ resource: call.resource, id: call.id });
      else if (call.acquireId) acquires.push({ resource: call.resource, id: call.acquireId });
      call.done(errFor(call), null, call);
    }
    return acquires;
  }

  onData(link, chunk) {
    if (link !== this.link || this.state === 'ended') return;
    this.lastRx = now();
    let frames;
    try {
      frames = link.reader.push(chunk);
    } catch (e) {
      this.end('PROTOCOL', e instanceof FrameError ? e.message : `unreadable stream: ${e.message}`);
      return;
    }
    for (const f of frames) {
      if (this.state === 'ended' || link !== this.link) return;
      this.onFrame(f);
    }
    this.schedule();
  }

  onFrame(frame) {
    let msg;
    try {
      msg = decodeServerMessage(frame);
    } catch (e) {
      this.end('PROTOCOL', `undecodable frame from the daemon: ${e.message}`);
      return;
    }
    if (msg.response) this.onResponse(msg.response);
    else if (msg.event) this.onEvent(msg.event);
    // A ServerMessage kind this client does not know: ignored, like unknown events.
  }

  /** Queues one request frame. */
  write(frame) {
    this.lastTx = now();
    this.link.sock.write(frame);
  }

  // --- requests ---------------------------------------------------------------------

  /**
   * Sends one request. `done(err, body, call)` runs exactly once: with the
   * reply body, the daemon's refusal, or the session's end. timeoutMs 0 =
   * no deadline of its own (keepalives: the session's staleness bounds them).
   * Returns the call, or null (done already ran) when the session is over.
   */
  send(kind, body, timeoutMs, done, label = kind, during = null) {
    if (!this.usable()) {
      done(this.closedError());
      return null;
    }
    if (this.moving && during !== this.moving) {
      done(new RlockError('UNAVAILABLE', `${label}: the session is moving to another connection; try again`, { retryAfter: 100 }));
      return null;
    }
    const id = this.nextId++;
    const call = {
      id, kind, label, done, sentAt: 0, timer: null, cancelled: false, expect: REPLY_BODY[kind],
      resource: body.resource,
    };
    let frame;
    try {
      frame = encodeFrame(encodeRequest({ id, [kind]: body }));
    } catch (e) {
      done(new TypeError(`cannot encode ${kind}: ${e.message}`));
      return null;
    }
    this.pending.set(id, call);
    if (timeoutMs > 0) {
      call.timer = setTimeout(() => this.deadline(call, timeoutMs), timeoutMs);
      call.timer.unref();
    }
    // t_send of docs/protocol.md §6.5: read just before the request is written.
    call.sentAt = now();
    this.write(frame);
    this.schedule();
    return call;
  }

  /** send() as a promise of the reply body. */
  call(kind, body, timeoutMs, label = kind) {
    return new Promise((resolve, reject) => {
      this.send(kind, body, timeoutMs, (err, reply) => (err ? reject(err) : resolve(reply)), label);
    });
  }

  usable() {
    this.check();
    return this.state === 'open';
  }

  closedError() {
    const why = this.endError ? this.endError.message : 'closed';
    return new RlockError('CLOSED', `the session has ended: ${why}`);
  }

  // No answer in time: the outcome is unknown. Closing the session releases
  // whatever it holds, which makes any outcome harmless.
  deadline(call, timeoutMs) {
    if (this.pending.get(call.id) !== call) return;
    this.end('CLOSED', `no answer to ${call.label} (request ${call.id}) within ${timeoutMs} ms: outcome unknown, session closed`, { culprit: call });
  }

  onResponse(r) {
    const id = u64Number(r.id);
    const call = this.pending.get(id);
    if (!call) {
      // Id 0 answers a frame the daemon could not read: it closes the
      // connection next, and this says why.
      if (id === 0 && r.status !== 0) this.daemonSaid = `${statusName(r.status)}: ${r.message}`;
      return;
    }
    this.pending.delete(id);
    if (call.timer) clearTimeout(call.timer);
    // The daemon read this request: the session lives a timeout past its arrival.
    if (call.sentAt > this.answeredSent) this.answeredSent = call.sentAt;
    if (r.status !== 0) {
      call.done(fromResponse(r, call.label), null, call);
      // SHUTTING_DOWN: the daemon is stopping; treated like the connection's end (§5).
      if (r.status === STATUS_SHUTTING_DOWN && this.state === 'open' && !this.moving) {
        this.moveOrEnd('the daemon answered SHUTTING_DOWN', 'handover');
      }
      return;
    }
    const body = call.expect ? r[call.expect] : null;
    if (call.expect && !body) {
      const err = new RlockError('PROTOCOL', `the daemon answered ${call.label} with the wrong reply body`);
      call.done(err, null, call);
      this.end('PROTOCOL', err.message);
      return;
    }
    call.done(null, body, call);
  }

  onEvent(ev) {
    if (ev.lock_lost) {
      const l = ev.lock_lost;
      const g = this.grants.get(l.token);
      if (g) g.lose(lostReasonName(l.reason), l.message || '');
    } else if (ev.session_closing) {
      const sc = ev.session_closing;
      const why = `the daemon is closing the session: ${sc.reason || 'no reason given'}`;
      if (sc.resume) this.moveOrEnd(why, 'handover');
      else this.end('CLOSED', why);
    } else if (ev.leader_changed) {
      if (this.hooks.onLeader) this.hooks.onLeader(ev.leader_changed);
    }
    // Event kinds this client does not know are ignored (§4.1).
  }

  // --- locks ------------------------------------------------------------------------

  addGrant(g) {
    this.grants.set(g.wire, g);
    this.minWdTtl = null;
    this.schedule();
  }

  /** An adopt gave the key a new token: the grant is found by that one now. */
  rekeyGrant(g, wire) {
    if (this.grants.get(g.wire) === g) this.grants.delete(g.wire);
    g.wire = wire;
    if (g.state === 'held') this.grants.set(wire, g);
  }

  dropGrant(g) {
    if (this.grants.get(g.wire) === g) this.grants.delete(g.wire);
    this.minWdTtl = null;
  }

  /** A PingReply sent at sentAt vouches for the watchdog locks granted before it. */
  vouched(sentAt, validMs) {
    this.pingSeq++;
    this.wdValidUntil = sentAt + validMs;
    const t = now();
    for (const g of this.grants.values()) {
      if (g.watchdog && g.validUntil() > t) g.uncertainNotified = false;
    }
    this.schedule();
  }

  /** The session's bound on every lock: a session timeout past the latest answered send. */
  sessionBound() {
    return this.sessionTimeout > 0 ? this.answeredSent + this.sessionTimeout : Infinity;
  }

  // --- time -------------------------------------------------------------------------

  // How long the client may go unheard (or hear nothing) before it must
  // assume the daemon has ended the session. The daemon counts from a later
  // moment (the frame's arrival); the margin covers timers firing early.
  staleLimit() {
    const t = this.sessionTimeout;
    if (t === 0) return Infinity;
    return Math.max(1, t - Math.max(Math.floor(t / 50), 2));
  }

  /**
   * Ends the session if the daemon may have given up on it by now: nothing
   * sent, or nothing heard, for a session timeout (a paused process, a
   * stopped or cut-off daemon).
   */
  check() {
    if (this.state !== 'open' || this.moving) return;
    const t = now();
    const limit = this.staleLimit();
    if (t - this.lastTx >= limit) {
      this.moveOrEnd(`nothing sent to the daemon for ${Math.round(t - this.lastTx)} ms (session timeout ${this.sessionTimeout} ms)`, 'broken');
    } else if (t - this.lastRx >= this.silentLimit()) {
      this.moveOrEnd(`nothing heard from the daemon for ${Math.round(t - this.lastRx)} ms (session timeout ${this.sessionTimeout} ms)`, 'silent');
    }
  }

  // A session that can move leaves a silent daemon after two thirds of the
  // timeout (a keepalive goes out at least every third of it and is answered
  // at once), which leaves a third for the move; one that cannot waits for
  // the whole timeout.
  silentLimit() {
    const limit = this.staleLimit();
    return this.sessionSecret && this.hooks.onMove ? Math.floor((limit * 2) / 3) : limit;
  }

  keepaliveNeed() {
    if (this.minWdTtl === null) {
      let m = 0;
      for (const g of this.grants.values()) {
        if (g.watchdog && (m === 0 || g.ttl < m)) m = g.ttl;
      }
      this.minWdTtl = m;
    }
    return this.minWdTtl === 0 ? 0 : Math.max(Math.floor(this.minWdTtl / 3), MIN_KEEPALIVE_MS);
  }

  // A Ping goes out after a keepalive interval without writing, and after one
  // without hearing anything; while watchdog locks are held, also at least
  // every third of the shortest ttl: its answer is what keeps their
  // validity ahead.
  pingAt() {
    const quiet = Math.max(this.lastRx, this.lastPing);
    let at = Math.min(this.lastTx, quiet) + this.keepalive;
    const need = this.keepaliveNeed();
    if (need > 0 && this.lastPing + need < at) at = this.lastPing + need;
    return at;
  }

  sendKeepalive() {
    this.lastPing = now();
    this.send('ping', {}, 0, (err, reply, call) => {
      if (!err) this.vouched(call.sentAt, reply.valid_ms);
    });
  }

  /** Recomputes the timer once per turn, however many frames came. */
  schedule() {
    if (this.scheduled || this.state === 'ended') return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      this.arm();
    });
  }

  arm() {
    if (this.state === 'ended') return;
    if (this.moving) return; // the move keeps its own timer
    let at = this.pingAt();
    const limit = this.staleLimit();
    at = Math.min(at, this.lastTx + limit, this.lastRx + this.silentLimit());
    for (const g of this.grants.values()) {
      if (!g.uncertainNotified) at = Math.min(at, g.validUntil());
    }
    if (this.timer && at >= this.timerAt) return; // the timer set fires early enough
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.tick(), Math.max(1, Math.ceil(at - now())));
    this.timer.unref();
  }

  tick() {
    this.timer = null;
    this.timerAt = Infinity;
    this.check();
    if (this.state !== 'open') return;
    const t = now();
    if (t >= this.pingAt()) this.sendKeepalive();
    for (const g of [...this.grants.values()]) {
      if (!g.uncertainNotified && t >= g.validUntil()) {
        g.uncertainNotified = true;
        g.becameUncertain();
      }
    }
    this.arm();
  }

  // --- the end ----------------------------------------------------------------------

  /**
   * Ends the session: every pending call fails, every held lock is lost
   * (reason 'session'), the socket is closed. code is the end's code
   * ('CLOSED' or 'PROTOCOL'): pending calls fail with it, except opts.culprit,
   * the call whose deadline passed, which fails with DEADLINE.
   * opts.quiet: the application ended the session itself (no 'lost' events).
   * opts.graceful: half-close the socket instead of destroying it.
   */
  end(code, why, opts = {}) {
    if (this.state === 'ended') return;
    this.state = 'ended';
    const quiet = Boolean(opts.quiet || this.closing);
    this.endError = new RlockError(opts.culprit ? 'DEADLINE' : code, why);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.link) {
      if (opts.graceful) this.link.sock.end();
      else this.link.sock.destroy();
    }
    this.moving = null;
    if (this.hooks.onEnd) this.hooks.onEnd();
    const calls = [...this.pending.values()];
    this.pending.clear();
    for (const call of calls) {
      if (call.timer) clearTimeout(call.timer);
      let err;
      if (call === opts.culprit) err = new RlockError('DEADLINE', `${call.label}: ${why}`);
      else if (code === 'PROTOCOL') err = new RlockError('PROTOCOL', `${call.label}: the session has ended: ${why}`);
      else err = new RlockError('CLOSED', `${call.label}: the session has ended: ${why}`);
      call.done(err, null, call);
    }
    for (const g of [...this.grants.values()]) g.lose('session', why, quiet);
    this.hooks.onClose(quiet ? null : this.endError);
  }

  /** Says Goodbye and resolves once the socket is closed (at most timeoutMs later). */
  async goodbye(timeoutMs) {
    this.closing = true;
    if (this.state === 'open' && !this.moving) {
      await new Promise((resolve) => {
        this.send('goodbye', {}, timeoutMs, () => resolve());
      });
      this.end('CLOSED', 'closed by the application', { quiet: true, graceful: true });
    } else {
      this.end('CLOSED', 'closed by the application', { quiet: true });
    }
    const closed = this.closed;
    const timer = setTimeout(() => this.link && this.link.sock.destroy(), timeoutMs);
    timer.unref();
    await closed;
    clearTimeout(timer);
  }
}

module.exports = { Engine, now };
