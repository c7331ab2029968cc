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
-- Returns {1, pttl}  adopted: the key holds new and expires in pttl ms
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
return {1, pttl}
