-- SPDX-License-Identifier: BSD-3-Clause
-- adopt.lua: a daemon takes over a lock of a resumed session (Adopt): if the
-- key still holds the token the session was given, swap in the adopting
-- daemon's new token. Every write any daemon makes to a lock key compares its
-- token first, so from here on the daemon the session left (paused, cut off,
-- or slow to notice) can neither renew, shorten nor delete the key.
--
-- KEYS[1]  lock key  PREFIX{resource}
-- ARGV[1]  token     the token the session holds the lock with
-- ARGV[2]  new       the adopting daemon's token for it
-- ARGV[3]  ttl       ms: the key expires no sooner than this from now (the
--                    lock's ttl, renewed by the watchdog); 0 = keep its PTTL
--                    (a lock the client times itself)
--
-- KEYS[2]  (optional) holders key PREFIX{resource}:holders, and
-- KEYS[3]  permits key PREFIX{resource}:permits: a shared hold or a semaphore's
--          permits (the key holds a group's marker "group:..."): the place of
--          token among the holders is given to new, with the same end or
--          ttl from now if later, and its permits with it
--
-- An election's leader record (KEYS[1]:leader, acquire.lua) that names token
-- names new from here on, and expires with the key.
--
-- Returns {1, pttl}  adopted: the key holds new and expires in pttl ms
--         {1, pttl, 'leader'}
--                    the same, and the lock leads an election (renew.lua
--                    keeps its leader record alive with it)
--         {1, pttl, marker, permits}
--                    adopted a group place: new's place ends in pttl ms;
--                    marker is the group's ("group:rw", "group:sem:N") and
--                    permits the place's (0 for a shared hold)
--         {0, 0}     the key does not exist (expired, deleted, flushed)
--         {-1, 0}    the key holds another value (taken, or adopted already
--                    by another daemon), or is not a string
--
-- Like renew.lua it never shortens the key: an adopt that runs late, after
-- its daemon gave up waiting for the answer, still only lengthens it.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then
    return {-1, 0}
end
if not v then
    return {0, 0}
end
if KEYS[2] and string.sub(v, 1, 6) == 'group:' then
    -- A place among a group's holders. One that ended is gone: it may already
    -- have been counted free (group_renew.lua), so it is never brought back.
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local ends = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0')
    if ends <= now then
        return {0, 0}
    end
    local ttl = tonumber(ARGV[3])
    if ttl > 0 and now + ttl > ends then
        ends = now + ttl
    end
    redis.call('ZREM', KEYS[2], ARGV[1])
    redis.call('ZADD', KEYS[2], ends, ARGV[2])
    local k = redis.call('HGET', KEYS[3], ARGV[1])
    if k then
        redis.call('HDEL', KEYS[3], ARGV[1])
        redis.call('HSET', KEYS[3], ARGV[2], k)
    end
    if redis.call('PTTL', KEYS[1]) < ends - now then
        redis.call('PEXPIRE', KEYS[1], ends - now)
        redis.call('PEXPIRE', KEYS[2], ends - now)
        redis.call('PEXPIRE', KEYS[3], ends - now)
    end
    return {1, ends - now, v, tonumber(k or '0')}
end
if v ~= ARGV[1] then
    return {-1, 0}
end
local pttl = redis.call('PTTL', KEYS[1])
local ttl = tonumber(ARGV[3])
if pttl < 0 then
    -- No expiry (never set by rlockd): bound it by the lock's ttl.
    pttl = ttl > 0 and ttl or 1000
end
if ttl > pttl then
    pttl = ttl
end
if pttl < 1 then
    pttl = 1 -- expiring this very millisecond: SET refuses PX 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', pttl)
-- pcall: a record that cannot be read or written leaves the adopt as it is.
local lk = KEYS[1] .. ':leader'
if redis.pcall('HGET', lk, 'token') == ARGV[1] then
    redis.pcall('HSET', lk, 'token', ARGV[2])
    redis.pcall('PEXPIRE', lk, pttl)
    return {1, pttl, 'leader'}
end
return {1, pttl}
