// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The copied lock code of the articles rlockd's users start from, as they
// give it: ioredis, SET key token EX seconds NX with a random (version 4)
// UUID, and the compare-and-delete release script. `publish: true` adds the
// one line docs/migrating.md §2 asks for, which wakes rlockd's waiters.

const crypto = require('node:crypto');
const Redis = require('ioredis');

const releaseLockScript = `
if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end
`;

const releaseLockScriptPublishing = `
if redis.call("get", KEYS[1]) == ARGV[1] then
    redis.call("del", KEYS[1])
    redis.call("publish", KEYS[1] .. ":free", KEYS[1])  -- wakes rlockd's waiters
    return 1
else
    return 0
end
`;

class SeedLock {
  /** redisPath: the unix socket of the Redis both sides share. */
  constructor(redisPath, { publish = false } = {}) {
    this.redis = new Redis({ path: redisPath, lazyConnect: false, maxRetriesPerRequest: 2 });
    this.script = publish ? releaseLockScriptPublishing : releaseLockScript;
  }

  /** The article's acquireLock: the token, or null when the key is taken. */
  async acquireLock(lockKey, expireSeconds) {
    const token = crypto.randomUUID();
    const result = await this.redis.set(lockKey, token, 'EX', expireSeconds, 'NX');
    return result === 'OK' ? token : null;
  }

  /** The article's releaseLock: true when this token's key was deleted. */
  async releaseLock(lockKey, token) {
    const result = await this.redis.eval(this.script, 1, lockKey, token);
    return result === 1;
  }

  /** What an application does with the two: try again every few ms until it holds the key. */
  async acquireRetrying(lockKey, expireSeconds, deadlineMs) {
    for (;;) {
      const token = await this.acquireLock(lockKey, expireSeconds);
      if (token) return token;
      if (Date.now() > deadlineMs) throw new Error(`the copied code could not take ${lockKey} in time`);
      await new Promise((resolve) => setTimeout(resolve, 2 + Math.floor(Math.random() * 8)));
    }
  }

  close() {
    this.redis.disconnect();
  }
}

module.exports = { SeedLock };
