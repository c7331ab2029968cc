// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// A shop process of the stock test: one client, TASKS concurrent sellers;
// prints its report as one JSON line. Usage: node shop-worker.js ADDR REDIS_SOCK TASKS

const { connect } = require('../..');
const { Redis } = require('./redis');
const { runShop } = require('./shop');

async function main() {
  const [addr, redisSock, tasks] = process.argv.slice(2);
  const redis = await Redis.connect(redisSock);
  const client = await connect({ servers: [addr], name: `shop-worker-${process.pid}` });
  try {
    const report = await runShop(client, redis, Number(tasks));
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    await client.close();
    redis.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
