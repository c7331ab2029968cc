// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// Moving a session to another connection (docs/protocol.md §10): when the
// connection breaks, the daemon goes silent, or it asks the session to leave
// (SessionClosing with resume), the client connects again — to any address of
// its list, the same one included — sends Resume with the session's secret,
// one Adopt per held lock and one Release{acquire_id} per Acquire left
// unanswered, and carries on with the same session id, fences and tokens.
// Only a daemon with a resume key gives a secret; without one the session
// ends with its connection.

const { setTimeout: sleep } = require('node:timers/promises');
const { connectAny } = require('./connection');
const { spreadOrder } = require('./address');
const { RlockError } = require('./errors');
const { toU64 } = require('./codec');
const { now } = require('./engine');

// Answers to a Resume that no other daemon of the list would change.
const REFUSALS = new Set(['UNAUTHENTICATED', 'INVALID', 'PERMISSION_DENIED']);

class Mover {
  /**
   * @param {object} ctx {servers, tls, hello: {client_name, session_timeout_ms, auth_token},
   *   onResumed()}
   */
  constructor(engine, ctx) {
    this.engine = engine;
    this.ctx = ctx;
    this.move = null;    // the move under way: {why, deadline, oldLinks, acquires, timer, running}
    this.resumes = 0;
  }

  /** Begins a move (or restarts the one under way). False when the session cannot move. */
  begin(why, kind) {
    const e = this.engine;
    if (!e.sessionSecret || e.closing || e.state !== 'open') return false;
    const old = e.detachLink();
    let m = this.move;
    if (!m) {
      m = {
        why,
        // The daemon left behind keeps the session a timeout past our last frame.
        deadline: Math.min(e.lastTx, e.lastRx) + e.staleLimit(),
        oldLinks: [],
        acquires: [],
        timer: null,
        running: false,
      };
      this.move = m;
      e.moving = m;
      if (e.timer) clearTimeout(e.timer);
      e.timer = null;
    }
    // A silent daemon may be merely stopped: keep its connection open until
    // the locks are adopted elsewhere, or its end would release them.
    if (old) {
      if (kind === 'silent') m.oldLinks.push(old);
      else old.sock.destroy();
    }
    const unavailable = (call) => new RlockError('UNAVAILABLE',
      `${call.label}: the connection was lost (${why}); the session is moving`, { retryAfter: 100 });
    m.acquires.push(...e.failPending(unavailable));
    for (const g of e.grants.values()) {
      if (!g.uncertainNotified) {
        g.uncertainNotified = true;
        g.becameUncertain();
      }
    }
    this.armExpiry(m);
    if (!m.running) {
      m.running = true;
      this.run(m).catch((err) => e.end('CLOSED', `moving the session failed: ${err.message}`));
    }
    return true;
  }

  /** Locks whose validity ends before the move is done are lost there and then. */
  armExpiry(m) {
    if (m.timer) clearTimeout(m.timer);
    const e = this.engine;
    let at = Infinity;
    for (const g of e.grants.values()) at = Math.min(at, g.validUntil());
    if (at === Infinity) return;
    m.timer = setTimeout(() => {
      m.timer = null;
      if (this.move !== m) return;
      const t = now();
      for (const g of [...e.grants.values()]) {
        if (t >= g.validUntil()) g.lose('expired', 'its validity ended while the session was moving');
      }
      this.armExpiry(m);
    }, Math.max(1, Math.ceil(at - now())));
    m.timer.unref();
  }

  finish(m) {
    if (m.timer) clearTimeout(m.timer);
    for (const l of m.oldLinks) l.sock.destroy();
    m.oldLinks = [];
    if (this.move === m) this.move = null;
  }

  /** The session ended (whatever ended it): stop moving. */
  stop() {
    if (this.move) this.finish(this.move);
  }

  async run(m) {
    const e = this.engine;
    let pause = 50;
    for (;;) {
      for (const addr of spreadOrder(this.ctx.servers)) {
        if (this.move !== m || e.state !== 'open') return;
        const left = m.deadline - now();
        if (left <= 0) {
          e.end('CLOSED', `${m.why}; the session could not move within its timeout`);
          return;
        }
        const tryMs = Math.min(left, Math.max(500, Math.min(5000, e.sessionTimeout / 4)));
        const id = e.nextId++;
        const request = {
          id,
          resume: {
            session_id: e.sessionId,
            session_secret: e.sessionSecret,
            client_name: this.ctx.hello.client_name,
            protocol_version: 1,
            session_timeout_ms: this.ctx.hello.session_timeout_ms,
            auth_token: this.ctx.hello.auth_token,
          },
        };
        const sentAt = now();
        let link;
        try {
          link = await connectAny([addr], request, { tls: this.ctx.tls, timeoutMs: tryMs });
        } catch (err) {
          if (err instanceof RlockError && REFUSALS.has(err.code)) {
            e.end('CLOSED', `${m.why}; the daemon at ${addr.text} refused to resume the session: ${err.message}`);
            return;
          }
          continue;
        }
        if (this.move !== m || e.state !== 'open') {
          link.sock.destroy();
          return;
        }
        if (link.response.hello.session_id !== e.sessionId) {
          link.sock.destroy();
          e.end('PROTOCOL', 'the daemon resumed another session');
          return;
        }
        if (await this.adoptAll(m, link, sentAt)) {
          this.finish(m);
          e.moving = null;
          this.resumes++;
          e.schedule();
          this.ctx.onResumed();
          return;
        }
        // The new connection failed too: try again.
      }
      await sleep(pause);
      pause = Math.min(pause * 2, 1000);
    }
  }

  /**
   * On a connection that resumed the session: takes every held lock over
   * (Adopt) and gives back what the unanswered Acquires may have taken.
   * True when all of that got its answer on this connection.
   */
  async adoptAll(m, link, resumeSentAt) {
    const e = this.engine;
    e.takeHello(link.response.hello);
    e.answeredSent = resumeSentAt;
    e.lastRx = now();
    e.attach(link);
    const timeout = Math.max(1000, m.deadline - now());
    const send = (kind, body, label) => new Promise((resolve) => {
      e.send(kind, body, timeout, (err, reply, call) => resolve({ err, reply, call }), label, m);
    });
    const adopts = [...e.grants.values()].map(async (g) => {
      for (;;) {
        const { err, reply, call } = await send('adopt', {
          resource: g.resource,
          token: g.wire,
          fence: toU64(g.fence),
          ttl_ms: g.ttl,
          watchdog_off: !g.watchdog,
          owner: toU64(g.owner),
          hold_count: g.holds,
          max_hold_until_ms: g.maxHoldUntil,
          lock_delay_ms: g.lockDelay,
          seal: g.seal,
        }, `adopt ${g.resource}`);
        if (!err) {
          e.rekeyGrant(g, reply.token);
          g.update({ ttl_ms: reply.ttl_ms, valid_ms: reply.valid_ms, seal: reply.seal }, call.sentAt);
          return true;
        }
        if (e.link !== link || e.state !== 'open') return false; // this connection failed too
        if (err.code === 'UNAVAILABLE' && now() < m.deadline) {
          await sleep(100); // Redis did not answer: the daemon says to try again
          continue;
        }
        // Gone, taken, or not this session's: a LockLost came first for most.
        g.lose(err.code === 'NOT_HELD' ? 'missing' : 'unspecified', `not taken over after the move: ${err.message}`);
        return true;
      }
    });
    const acquires = m.acquires.slice();
    const releases = acquires.map(async (a) => {
      const { err } = await send('release', { resource: a.resource, acquire_id: a.id },
        `release of an acquire left unanswered (${a.resource})`);
      if (!err) m.acquires.splice(m.acquires.indexOf(a), 1);
      return !err || (e.link === link && err.code !== 'UNAVAILABLE');
    });
    const results = await Promise.all([...adopts, ...releases]);
    return e.link === link && e.state === 'open' && results.every(Boolean);
  }
}

module.exports = { Mover };
