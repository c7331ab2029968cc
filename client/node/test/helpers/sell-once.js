// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The job of `rlockctl run stock:item42 -- node sell-once.js REDIS_SOCK`: one
// sale of the shop (helpers/shop.js's keys), with the occupancy check. Exits 3
// when another seller was inside, 0 otherwise (also when the stock is gone).

const { Redis } = require('./redis');
const { KEYS } = require('./shop');

async function main() {
  const redis = await Redis.connect(process.argv[2]);
  try {
    const inside = await redis.command('INCR', KEYS.inside);
    let overlap = inside !== 1;
    try {
      const stock = Number(await redis.command('GET', KEYS.stock));
      if (stock > 0) {
        await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 3)));
        await redis.command('SET', KEYS.stock, String(stock - 1));
        await redis.command('INCR', 'shop:sold-by-rlockctl');
      }
    } finally {
      if (Number(await redis.command('DECR', KEYS.inside)) !== 0) overlap = true;
    }
    process.exitCode = overlap ? 3 : 0;
  } finally {
    redis.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
