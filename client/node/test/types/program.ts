// SPDX-License-Identifier: BSD-3-Clause
// A typed program against the declarations (index.d.ts): compiled with
// tsc --noEmit by test/package.test.js, never run.

import {
  connect, RlockError, Lock, Leadership, Observer, type LockState, type LostReason, type LeaderInfo, type LeaderReply,
} from 'rlockd';

async function main(): Promise<void> {
  const client = await connect({ servers: ['unix:/run/rlockd/rlockd.sock'], name: 'typed', timeout: 5000 });
  client.on('lost', (lock: Lock | undefined, err: RlockError) => {
    const reason: LostReason | undefined = err.lostReason;
    console.log(lock?.resource, reason);
  });
  client.on('close', (err) => console.log(err?.code));
  const ac = new AbortController();
  const lock: Lock = await client.acquire('orders/42', { ttl: 30000, wait: 5000, signal: ac.signal, owner: 7n });
  const fence: bigint = lock.fence;
  const state: LockState = lock.state;
  const until: number = lock.validUntil;
  lock.on('uncertain', (e) => console.log(e.code));
  const left: number = await lock.release();
  const sold: boolean = await client.using('stock:item42', { wait: 1000 }, async (signal, l) => {
    signal.throwIfAborted();
    return l.fence > fence;
  });
  const n: number = await client.using('x', () => 1);
  const read: boolean = await client.using('stock:item42', { shared: true, wait: 1000 }, async (signal, l) => l.shared);
  const readAll: Lock[] = await client.acquireAll(['acct/1', 'acct/2'], { shared: true });
  const exported: number = await client.using('exports', { limit: 3, permits: 1, wait: 60000 }, async (signal, l) => l.permits + l.limit);
  const slots: Lock[] = await client.acquireAll(['gpu/a', 'gpu/b'], { limit: 4, permits: 2 });
  const both: Lock[] = await client.acquireAll(['acct/1', 'acct/2'], { wait: 1000 });
  const moved: bigint = await client.usingAll(['acct/1', 'acct/2'], async (signal, ls) => ls[0].fence + ls[1].fence);
  try {
    await client.acquire('y');
  } catch (e) {
    if (e instanceof RlockError && e.code === 'NOT_ACQUIRED') console.log(e.retryAfter);
    if (e instanceof RlockError && e.code === 'WRONG_KIND') console.log('held shared: release, then acquire exclusive');
    const h = e instanceof RlockError ? e.holder : undefined;
    if (h?.here) console.log(h.sessionId, h.clientName, h.owner + 1n, h.since, h.holders, h.ttlLeftMs);
    else if (h) console.log(h.foreign, h.ttlLeftMs);
  }
  const leadership: Leadership = await client.campaign('scheduler', 'host-a:8080', { wait: 30000, ttl: 10000 });
  const term: bigint = leadership.term;
  const asLock: Lock = leadership;
  const value: string = leadership.value;
  leadership.on('lost', (e) => console.log(e.lostReason));
  const resigned: number = await leadership.resign();
  const ran: bigint = await client.lead('scheduler', 'host-a:8080', { wait: 1000 }, async (signal, l) => {
    signal.throwIfAborted();
    return l.term;
  });
  const ranToo: string = await client.lead('scheduler', '', (signal, l) => l.value);
  const now: LeaderReply = await client.leader('scheduler');
  const ttlLeft: number = now.ttlMs;
  const observer: Observer = await client.observe('scheduler', (c: LeaderInfo) => console.log(c.elected, c.term, c.value));
  const first: LeaderInfo = observer.leader;
  observer.on('close', (err) => console.log(err?.code));
  const other: Observer = await client.observe('scheduler', { timeout: 1000 });
  await other.stop();
  await observer[Symbol.asyncDispose]();
  console.log(term, asLock.fence, value, resigned, ran, ranToo, ttlLeft, first.term, observer.state);
  const info = await client.serverInfo();
  const prefix: string = info.keyPrefix;
  const locks = await client.locks({ prefix: 'orders/', limit: 100 });
  const owner: bigint | undefined = locks[0]?.owner;
  const sharedHolder: boolean | undefined = locks[0]?.shared;
  const permitsHeld: number | undefined = locks[0]?.permits;
  const semLimit: number | undefined = locks[0]?.limit;
  const forced = await client.forceRelease('orders/42');
  const st = await client.stats();
  const waiters: number = st.waiters + forced.waiters;
  console.log(state, until, left, sold, n, read, readAll.length, exported, slots.length, permitsHeld, semLimit, sharedHolder, prefix, owner, waiters, (await client.ping()).rtt);
  await lock[Symbol.asyncDispose]();
  await client.close();
}

void main();
