// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The shop of the stock tests: tasks that sell stock:item42 one piece at a
// time, each sale a read-modify-write of a Redis counter under
// using('stock:item42'). Without mutual exclusion the count goes wrong;
// an occupancy counter and the last fence seen (both in Redis, so every
// process shares them) catch a second task inside, or a fence that does not
// grow, on the spot.

const { setTimeout: sleep } = require('node:timers/promises');

const KEYS = {
  stock: 'shop:stock:item42',
  inside: 'shop:inside',
  lastFence: 'shop:last-fence',
};

async function sellOne(redis, signal, lock, report) {
  const inside = await redis.command('INCR', KEYS.inside);
  try {
    if (inside !== 1) report.overlaps++;
    report.maxInside = Math.max(report.maxInside, inside);
    const last = await redis.command('GET', KEYS.lastFence);
    if (last !== null && !(lock.fence > BigInt(last))) report.fenceErrors++;
    await redis.command('SET', KEYS.lastFence, lock.fence.toString());
    const stock = Number(await redis.command('GET', KEYS.stock));
    if (stock <= 0) return false;
    // Widen the window in which a second holder would break the count.
    await sleep(Math.floor(Math.random() * 3));
    signal.throwIfAborted();
    await redis.command('SET', KEYS.stock, String(stock - 1));
    return true;
  } finally {
    await redis.command('DECR', KEYS.inside);
  }
}

/** Runs `tasks` concurrent sellers on one client until the stock is gone. */
async function runShop(client, redis, tasks) {
  const report = { sold: 0, overlaps: 0, fenceErrors: 0, maxInside: 0, perTask: [] };
  await Promise.all(Array.from({ length: tasks }, async (_, i) => {
    let mine = 0;
    for (;;) {
      const sold = await client.using('stock:item42', { ttl: 10000, wait: 60000 },
        (signal, lock) => sellOne(redis, signal, lock, report));
      if (!sold) break;
      mine++;
    }
    report.perTask[i] = mine;
    report.sold += mine;
  }));
  return report;
}

module.exports = { KEYS, runShop };
