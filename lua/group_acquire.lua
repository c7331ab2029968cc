-- SPDX-License-Identifier: BSD-3-Clause
-- group_acquire.lua: take a place in a group of holders — a shared hold of a
-- read-write lock, or k permits of a semaphore — and hand out a fence from the
-- same fence key as exclusive grants (docs/design-kinds.md, "Redis layout").
--
-- KEYS[1]  marker key   PREFIX{resource}          "group:rw" or "group:sem:N"
-- KEYS[2]  holders key  PREFIX{resource}:holders  ZSET token -> expiry (ms, Redis time)
-- KEYS[3]  permits key  PREFIX{resource}:permits  HASH token -> k, "used" -> sum of k
-- KEYS[4]  fence key    PREFIX{resource}:fence    as acquire.lua
-- KEYS[5]  claim key    PREFIX{resource}:claim    an exclusive waiter's claim
-- ARGV[1]  token        the new holder's token
-- ARGV[2]  ttl_ms       its lease
-- ARGV[3]  fence_ttl    as acquire.lua
-- ARGV[4]  marker       "group:rw" (shared) or "group:sem:N" (N permits)
-- ARGV[5]  k            permits asked for (1 for a shared hold)
--
-- Returns  {1, fence}         granted (also when the token already holds its
--                             place: a retried call whose first answer was lost
--                             is granted again, never counted twice)
--          {0, pttl, foreign} busy: pttl is how long until a place may free
--                             (the exclusive holder's key, the claim, or the
--                             group's first lease to end); foreign as acquire.lua
--          {-1, marker}       the resource is held as another kind (marker is
--                             what holds it: "group:..." or "exclusive")
--
-- The marker key is a plain string, so the copied SET NX scripts see the
-- resource held (their SET NX fails) and their compare-and-delete, which
-- compares a token with "group:...", deletes nothing. The marker, holders and
-- permits keys always expire together at the latest lease end: a group nobody
-- renews disappears by itself. Leases whose end has passed are dropped (and
-- their permits given back) before counting, so a crashed daemon's permits
-- come back at their lease end even if nobody releases them.
local token, ttl, marker, k = ARGV[1], tonumber(ARGV[2]), ARGV[4], tonumber(ARGV[5])
local limit = tonumber(string.match(marker, '^group:sem:(%d+)$') or '0')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local cur = redis.pcall('GET', KEYS[1])
if type(cur) == 'table' then
    -- A key of another type: not ours, busy like any foreign holder.
    return {0, redis.call('PTTL', KEYS[1]), 1}
end
if cur and cur ~= marker then
    if string.sub(cur, 1, 6) == 'group:' or (limit > 0 and string.sub(cur, 1, 10) ~= 'tombstone:') then
        -- Another group kind, or a semaphore on an exclusive name (a tombstone
        -- is no kind: it keeps a lost holder's place, of any kind, till it ends).
        return {-1, string.sub(cur, 1, 6) == 'group:' and cur or 'exclusive'}
    end
    -- A shared hold waits behind an exclusive one (rlockd's, a tombstone,
    -- or the copied scripts').
    local holder = cur
    if string.sub(holder, 1, 10) == 'tombstone:' then
        holder = string.sub(holder, 11)
    end
    local ours = string.find(holder,
        '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-8%x%x%x%-[89ab]%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$') ~= nil
    return {0, redis.call('PTTL', KEYS[1]), ours and 0 or 1}
end

-- Drop the leases that ended; give their permits back.
local ended = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #ended > 0 then
    for _, gone in ipairs(ended) do
        if limit > 0 then
            local had = tonumber(redis.call('HGET', KEYS[3], gone) or '0')
            redis.call('HINCRBY', KEYS[3], 'used', -had)
            redis.call('HDEL', KEYS[3], gone)
        end
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
end

local mine = redis.call('ZSCORE', KEYS[2], token)
if not mine then
    if limit == 0 and redis.call('EXISTS', KEYS[5]) == 1 then
        -- An exclusive request waits for this group to drain: no new shared
        -- holds until it has had its turn (no writer starvation).
        return {0, redis.call('PTTL', KEYS[5]), 0}
    end
    if limit > 0 then
        if k > limit then
            return {-1, marker}
        end
        local used = tonumber(redis.call('HGET', KEYS[3], 'used') or '0')
        if used + k > limit then
            local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
            return {0, math.max(1, tonumber(first[2]) - now), 0}
        end
        redis.call('HINCRBY', KEYS[3], 'used', k)
        redis.call('HSET', KEYS[3], token, k)
    end
end
-- A retried grant keeps the longer of its two lease ends.
local ends = now + ttl
if mine and tonumber(mine) > ends then
    ends = tonumber(mine)
end
redis.call('ZADD', KEYS[2], ends, token)

-- Every key of the group lives until its last lease ends.
local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
local life = math.max(1, last - now)
redis.call('SET', KEYS[1], marker, 'PX', life)
redis.call('PEXPIRE', KEYS[2], life)
if limit > 0 then
    redis.call('PEXPIRE', KEYS[3], life)
end

local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local fence = us
local last_fence = tonumber(redis.call('SET', KEYS[4], string.format('%.0f', fence), 'PX', ARGV[3],
                                       'GET') or '0') or 0
if last_fence >= fence then
    fence = last_fence + 1
    redis.call('SET', KEYS[4], string.format('%.0f', fence), 'PX', ARGV[3])
end
return {1, fence}
