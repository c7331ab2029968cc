// SPDX-License-Identifier: BSD-3-Clause
// Type declarations of the rlockd package (lib/index.js). Needs @types/node.

/// <reference types="node" />

import { EventEmitter } from 'node:events';
import type { ConnectionOptions } from 'node:tls';

/** Status names of the daemon's answers (docs/protocol.md §5). */
export type StatusCode =
  | 'NOT_ACQUIRED' | 'TIMEOUT' | 'NOT_HELD' | 'INVALID' | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED' | 'LIMIT_EXCEEDED' | 'UNAVAILABLE' | 'SHUTTING_DOWN' | 'INTERNAL'
  | 'CANCELLED' | 'ALREADY_HELD' | 'NOT_FOUND' | 'WRONG_KIND' | 'DEADLOCK';

/** Codes the client raises itself. */
export type ClientCode = 'CLOSED' | 'DEADLINE' | 'PROTOCOL' | 'CONNECT' | 'LOCK_LOST' | 'UNCERTAIN';

export type ErrorCode = StatusCode | ClientCode;

/** Why a lock was lost; 'session': its session ended. */
export type LostReason =
  | 'unspecified' | 'expired' | 'stolen' | 'missing' | 'forced' | 'session' | 'max_hold';

export type LockState = 'held' | 'uncertain' | 'lost' | 'released';

export class RlockError extends Error {
  constructor(code: ErrorCode, message: string, extra?: {
    retryAfter?: number; lostReason?: LostReason; resource?: string; holder?: Holder; cause?: unknown;
  });
  readonly code: ErrorCode;
  /** ms to wait before trying again, when the daemon gave one (UNAVAILABLE). */
  readonly retryAfter?: number;
  /** With code LOCK_LOST: why. */
  readonly lostReason?: LostReason;
  /** With LOCK_LOST and UNCERTAIN: the lock's resource; from acquireAll: the lock that stopped it. */
  readonly resource?: string;
  /** With NOT_ACQUIRED and TIMEOUT of an acquire: who holds the lock, when the daemon knows. */
  readonly holder?: Holder;
}

/** Who holds the lock an acquire did not get (docs/protocol.md §6.1, Holder). */
export type Holder =
  | {
      /** A session of the daemon that answered holds it. */
      here: true;
      sessionId: string;
      clientName: string;
      owner: bigint;
      shared: boolean;
      /** A semaphore's limit (0: a lock), and the permits this holder has. */
      limit: number;
      permits: number;
      /** The daemon's wall clock at the grant, ms since the epoch. */
      since: number;
      /** Sessions of that daemon holding it (shared, semaphore); this is the first. */
      holders: number;
      /** Its validity left, ms. */
      ttlLeftMs: number;
    }
  | {
      /** Held outside that daemon: another rlockd, or a program's own SET NX. */
      here: false;
      /** The key's value was not made by rlockd. */
      foreign: boolean;
      /** The key's ttl left, ms (0: not known, or no expiry). */
      ttlLeftMs: number;
    };

/** An acquire withdrawn through its signal: code CANCELLED, name 'AbortError', cause = signal.reason. */
export class RlockAbortError extends RlockError {
  readonly code: 'CANCELLED';
}

export const STATUS_NAMES: readonly string[];
export const LOST_REASONS: readonly LostReason[];

export interface TlsOptions {
  /** CA certificates (PEM) the daemon's certificate must chain to; default: Node's CAs. */
  ca?: ConnectionOptions['ca'];
  /** Client certificate and key (PEM), for a daemon that asks for one. */
  cert?: ConnectionOptions['cert'];
  key?: ConnectionOptions['key'];
  /** Name the certificate must be issued for; default: the address's host. */
  servername?: string;
  /** false: accept any certificate (tests only). */
  rejectUnauthorized?: boolean;
}

export interface ConnectOptions {
  /** Daemon addresses: HOST:PORT, [IPV6]:PORT, unix:/path, each optionally behind tls://. */
  servers: string | readonly string[];
  /** Auth token, when the daemon has [auth] tokens. */
  token?: string;
  /** Shown in the daemon's logs and listings (at most 128 bytes). Default: script[pid]. */
  name?: string;
  /** Session timeout to ask for, ms; 0 (default) = the daemon's default. */
  sessionTimeout?: number;
  /** Time to connect and say Hello, over all addresses, ms. Default 5000. */
  connectTimeout?: number;
  /** Default deadline of each call, ms (an acquire adds its wait). Default 10000. */
  timeout?: number;
  tls?: TlsOptions;
  /** Move the session to another connection when the daemon goes away (needs a daemon with a resume key). Default true. */
  resume?: boolean;
}

export interface CallOptions {
  /** Deadline of this call, ms: no answer by then = DEADLINE, the session is closed. */
  timeout?: number;
}

/** An acquireAll entry taken in its own kind: the call's other options apply to it. */
export interface AcquireAllEntry {
  name: string;
  shared?: boolean;
  limit?: number;
  permits?: number;
}

export interface AcquireOptions extends CallOptions {
  /** Lease, ms; 0 (default) = the daemon's default_ttl. */
  ttl?: number;
  /** How long to wait for the lock, ms; 0 (default) = try once (NOT_ACQUIRED if held). */
  wait?: number;
  /** Longest hold, ms (then lost as 'max_hold'); 0 = the daemon's limit. */
  maxHold?: number;
  /** After an unclean end of the session nobody gets the lock for this long, ms. */
  lockDelay?: number;
  /**
   * Your trace id for this lock (a W3C traceparent, or an opaque id: at most 128
   * printable ASCII characters without space, quote or backslash): the daemon
   * writes it on every log line about the lock (wait, grant, refusal, release,
   * failed renewals, loss).
   */
  traceId?: string;
  /** false: the daemon does not renew the lease (use extend()). Default true. */
  watchdog?: boolean;
  /** Who acquires: acquires with the same owner re-enter. Default: a new owner per acquire. Below 2^63. */
  owner?: number | bigint;
  /** false: an acquire by the owner already holding the lock fails ALREADY_HELD. Default true. */
  reentry?: boolean;
  /**
   * true: take the lock shared (a read lock): any number of shared holders at
   * once, or one exclusive holder. Default false (exclusive). In one client a
   * resource is one lock: a shared acquire while the client holds it shared adds
   * a hold whatever its owner; an exclusive acquire by an owner holding it shared
   * fails WRONG_KIND (no upgrade); a shared acquire by the owner holding it
   * exclusive re-enters the exclusive lock.
   */
  shared?: boolean;
  /**
   * 1 .. 1000000: the resource is a semaphore of this many permits; its holders'
   * permits sum to at most `limit`. Every holder must name the same limit, and a
   * name is a semaphore or a lock, never both (else WRONG_KIND). Not with
   * `shared: true` (TypeError). In one client a semaphore is held once, like an
   * exclusive lock: the holding owner re-enters it, another owner waits.
   */
  limit?: number;
  /** With `limit`: the permits to take, all or none; 1 (default) .. limit. Without `limit`: TypeError. */
  permits?: number;
  /** Withdraws the acquire (Cancel); the promise then rejects with an RlockAbortError. */
  signal?: AbortSignal;
}

export interface ExtendResult {
  ttl: number;
  validUntil: number;
}

/** One hold of a lock. */
export class Lock extends EventEmitter {
  protected constructor();
  readonly resource: string;
  /** The grant's token (the value of the Redis key when granted). */
  readonly token: string;
  /** Fencing token: strictly greater than every earlier grant's for this resource. */
  readonly fence: bigint;
  readonly owner: bigint;
  readonly holdCount: number;
  readonly ttl: number;
  readonly watchdog: boolean;
  /** true: held shared; false: exclusive (also a shared acquire that re-entered its owner's exclusive hold). */
  readonly shared: boolean;
  /** A semaphore's limit; 0: a lock. */
  readonly limit: number;
  /** The semaphore permits this lock holds; 0: a lock. */
  readonly permits: number;
  readonly state: LockState;
  /** performance.now() time (ms) until which the lock is surely held; 0 when not held. */
  readonly validUntil: number;
  readonly lostReason: LostReason | null;
  /** Releases this hold; resolves with the holds left (0: the lock is free). */
  release(opts?: CallOptions): Promise<number>;
  /** Renews the lease to ttl ms from now (0 or omitted: the lock's own ttl). */
  extend(ttl?: number, opts?: CallOptions): Promise<ExtendResult>;
  [Symbol.asyncDispose](): Promise<void>;

  on(event: 'lost', listener: (error: RlockError) => void): this;
  on(event: 'uncertain', listener: (error: RlockError) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'lost', listener: (error: RlockError) => void): this;
  once(event: 'uncertain', listener: (error: RlockError) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** Options of campaign() and lead(): those of acquire() but shared, limit and permits (a campaign is exclusive). */
export interface CampaignOptions extends Omit<AcquireOptions, 'shared' | 'limit' | 'permits'> {
  /** Only false (the default) is accepted. */
  shared?: false;
}

/**
 * A campaign's grant: this client leads the election (one hold of its lock).
 * release() and resign() step down; its 'lost' event ends the leadership.
 */
export class Leadership extends Lock {
  private constructor();
  /** The leader's term: the grant's fence, greater than every earlier leader's. */
  readonly term: bigint;
  /** The value this candidate campaigned with. */
  readonly value: string;
  /** Steps down (release()); resolves with the holds left (0: no longer the leader). */
  resign(opts?: CallOptions): Promise<number>;
}

/** An election's leader, as a LeaderChanged event or an observer reports it. */
export interface LeaderInfo {
  /** A candidate leads. */
  elected: boolean;
  /** Its term (its grant's fence); with elected false, the last term seen, or 0n when none was. */
  term: bigint;
  /** Its value ('' when none leads). */
  value: string;
}

/** client.leader(): the leader now, with its lease left. */
export interface LeaderReply extends LeaderInfo {
  /** ms left of the leader's lease in Redis (renewed while its session lives); 0 when none leads. */
  ttlMs: number;
}

export type ObserverState = 'observing' | 'stopped' | 'closed';

/** One election observed (client.observe()). */
export class Observer extends EventEmitter {
  private constructor();
  readonly resource: string;
  /** The latest leader known. */
  readonly leader: LeaderInfo;
  readonly state: ObserverState;
  /** Stops observing; no 'change' follows. Resolves once the daemon has ended the subscription. */
  stop(opts?: CallOptions): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;

  on(event: 'change', listener: (leader: LeaderInfo) => void): this;
  on(event: 'close', listener: (error: RlockError | null) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'change', listener: (leader: LeaderInfo) => void): this;
  once(event: 'close', listener: (error: RlockError | null) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
}

export interface PingResult {
  /** The daemon's wall clock, ms since the epoch. */
  serverTime: number;
  /** Round trip, ms. */
  rtt: number;
}

export interface Metric { name: string; labels: string; value: number; }

export interface Stats {
  sessions: number;
  heldLocks: number;
  waiters: number;
  redisConnections: number;
  redisConnectionsReady: number;
  redisUp: boolean;
  scriptReloads: number;
  acquires: number;
  grants: number;
  locksLost: number;
  redisErrors: number;
  uptimeMs: number;
  serverVersion: string;
  metrics: Metric[];
}

export interface SessionInfo {
  sessionId: string;
  clientName: string;
  peer: string;
  state: 'accepted' | 'active' | string;
  role: 'open' | 'client' | 'admin' | 'none' | string;
  connectedAt: number;
  idleMs: number;
  locksHeld: number;
  waiting: number;
  inFlight: number;
  requestedTimeoutMs: number;
  timeoutMs: number;
  resumed: boolean;
}

export interface LockInfo {
  resource: string;
  sessionId: string;
  clientName: string;
  owner: bigint;
  fence: bigint;
  token: string;
  acquiredAt: number;
  ttlMs: number;
  ttlLeftMs: number;
  watchdog: boolean;
  holdCount: number;
  waiters: number;
  /** One of the resource's shared holders (a resource held shared is listed once per holding session). */
  shared: boolean;
  /** A semaphore's limit (a semaphore is listed once per holding session); 0: a lock. */
  limit: number;
  /** The permits this holder has; 0: a lock. */
  permits: number;
}

/** ServerInfoReply, camelCased; uint64 counters as numbers. */
export interface ServerInfo {
  serverVersion: string;
  protocolVersion: number;
  pid: number;
  startedAtMs: number;
  uptimeMs: number;
  configFile: string;
  listen: string;
  redisAddress: string;
  redisDatabase: number;
  keyPrefix: string;
  redisUp: boolean;
  sessions: number;
  heldLocks: number;
  waiters: number;
  [field: string]: string | number | boolean;
}

export interface PageOptions extends CallOptions {
  cursor?: string;
  /** Entries per page: 0 = 100, at most 1000. */
  limit?: number;
}

export interface LockFilter {
  /** Only resources starting with this. */
  prefix?: string;
  /** Only locks of this session. */
  sessionId?: string;
}

export interface ForceReleaseResult {
  sessionId: string;
  clientName: string;
  owner: bigint;
  fence: bigint;
  waiters: number;
}

export interface KillSessionResult {
  locksReleased: number;
  requestsDropped: number;
}

/** One session on one connection. */
export class Client extends EventEmitter {
  private constructor();
  readonly sessionId: string;
  readonly serverVersion: string;
  /** The effective session timeout, ms. */
  readonly sessionTimeout: number;
  /** The address the session is on. */
  readonly address: string;
  readonly closed: boolean;
  readonly closeReason: RlockError | null;
  /** True while the session moves to another connection. */
  readonly moving: boolean;
  /** Times the session resumed on another connection. */
  readonly resumes: number;

  acquire(resource: string, opts?: AcquireOptions): Promise<Lock>;
  /**
   * Acquires, runs fn, releases (even when fn throws). `signal` aborts when the
   * lock is lost or becomes uncertain; using then rejects with its reason.
   */
  using<T>(resource: string, opts: AcquireOptions, fn: (signal: AbortSignal, lock: Lock) => T | Promise<T>): Promise<T>;
  using<T>(resource: string, fn: (signal: AbortSignal, lock: Lock) => T | Promise<T>): Promise<T>;
  /**
   * Acquires every one of `resources` (1 to 16 different names) or none, in the
   * byte order of their names so that callers naming them in other orders never
   * deadlock; `wait` is one budget for the set, one owner holds them all.
   * Resolves with the locks in the order given; on failure what was taken has
   * been released again. `shared` takes every one of them shared; `limit` (and
   * `permits`) takes permits of every one of them, each a semaphore of that limit.
   */
  acquireAll(resources: readonly (string | AcquireAllEntry)[], opts?: AcquireOptions): Promise<Lock[]>;
  /** using() for several locks (acquireAll): `signal` aborts when any of them is lost or uncertain. */
  usingAll<T>(resources: readonly (string | AcquireAllEntry)[], opts: AcquireOptions, fn: (signal: AbortSignal, locks: Lock[]) => T | Promise<T>): Promise<T>;
  usingAll<T>(resources: readonly (string | AcquireAllEntry)[], fn: (signal: AbortSignal, locks: Lock[]) => T | Promise<T>): Promise<T>;
  /**
   * Campaigns for the election `resource` with `value` (at most 1024 bytes of
   * UTF-8, no NUL; else RangeError): an exclusive acquire whose grant makes
   * `value` the leader's. `wait` 0 (the default) tries once: NOT_ACQUIRED
   * while another candidate leads.
   */
  campaign(resource: string, value: string, opts?: CampaignOptions): Promise<Leadership>;
  /**
   * Campaigns, runs fn while leading, resigns (even when fn throws). `signal`
   * aborts when the leadership is lost or uncertain; lead then rejects with its reason.
   */
  lead<T>(resource: string, value: string, opts: CampaignOptions, fn: (signal: AbortSignal, leadership: Leadership) => T | Promise<T>): Promise<T>;
  lead<T>(resource: string, value: string, fn: (signal: AbortSignal, leadership: Leadership) => T | Promise<T>): Promise<T>;
  /** Who leads the election now (any daemon's candidates count). */
  leader(resource: string, opts?: CallOptions): Promise<LeaderReply>;
  /**
   * Observes the election: `observer.leader` is the leader now; 'change'
   * (onChange) follows each change, in order of terms, until stop().
   */
  observe(resource: string, opts?: CallOptions, onChange?: (leader: LeaderInfo) => void): Promise<Observer>;
  observe(resource: string, onChange?: (leader: LeaderInfo) => void): Promise<Observer>;
  ping(opts?: CallOptions): Promise<PingResult>;
  stats(opts?: CallOptions): Promise<Stats>;
  /** Says Goodbye (the daemon releases every lock at once); resolves when the socket is closed. */
  close(opts?: CallOptions): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;

  serverInfo(opts?: CallOptions): Promise<ServerInfo>;
  sessionsPage(opts?: PageOptions): Promise<{ sessions: SessionInfo[]; nextCursor: string; total: number }>;
  sessions(opts?: PageOptions): Promise<SessionInfo[]>;
  locksPage(opts?: PageOptions & LockFilter): Promise<{ locks: LockInfo[]; nextCursor: string }>;
  locks(opts?: PageOptions & LockFilter): Promise<LockInfo[]>;
  forceRelease(resource: string, token?: string, opts?: CallOptions): Promise<ForceReleaseResult>;
  killSession(sessionId: string, opts?: CallOptions): Promise<KillSessionResult>;

  on(event: 'lost', listener: (lock: Lock | undefined, error: RlockError) => void): this;
  on(event: 'close', listener: (error: RlockError | null) => void): this;
  on(event: 'moving', listener: (why: string) => void): this;
  on(event: 'resumed', listener: () => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'lost', listener: (lock: Lock | undefined, error: RlockError) => void): this;
  once(event: 'close', listener: (error: RlockError | null) => void): this;
  once(event: 'moving', listener: (why: string) => void): this;
  once(event: 'resumed', listener: () => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** Opens a session on the first of `servers` (in a spread order) that accepts one. */
export function connect(options: ConnectOptions): Promise<Client>;
