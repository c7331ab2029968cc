-- SPDX-License-Identifier: BSD-3-Clause
-- acquire.lua: take a lock exactly as `SET key token NX PX ttl` does, and
-- hand out a fencing token.
--
-- KEYS[1]  lock key   PREFIX{resource}        value = holder's token
-- KEYS[2]  fence key  PREFIX{resource}:fence  the last fence handed out
-- ARGV[1]  token      the new holder's token (a UUID string)
-- ARGV[2]  ttl_ms     lease in milliseconds
-- ARGV[3]  fence_ttl  how long the fence key outlives its last grant, in ms
-- KEYS[3]  (optional) claim key  PREFIX{resource}:claim
-- ARGV[4]  (with KEYS[3]) claim_ms: how long a claim lasts unless tried again
-- ARGV[5]  (optional) the claimant: one id for every try of a request, each of
--          which has a fresh token (default: the token)
--          (docs/design-kinds.md: an exclusive request waiting on shared holds
--          claims the resource, so that no new shared hold joins them);
--          claim_ms '0': no claim is taken (a campaign's first try)
-- KEYS[4]  (optional, with KEYS[3]) leader key  PREFIX{resource}:leader: the
--          request is a campaign (leader election); a grant records the new
--          leader there as a HASH of token, term (the fence) and value, expiring
--          with the lock (renew.lua keeps them together)
-- ARGV[6]  (with KEYS[4]) the candidate's value
-- ARGV[7]  (with KEYS[4]) where to PUBLISH the leader key after a grant ('' = none)
--
-- Returns  {1, fence}  granted; fence is strictly greater than every fence
--                      handed out before for this resource
--          {0, pttl, foreign}
--                      held by another token; pttl is its remaining lease in
--                      ms (-1: the key has no expiry); foreign is 1 when that
--                      token is not one rlockd makes (a version 8 UUID, or
--                      rlockd's tombstone of one), so that its release may
--                      come without a notice on the channel (the copied SET NX
--                      scripts); 2 when a group of rlockd's holds it
--                      ("group:...": its releases are announced, and a waiter
--                      with a claim tries again before the claim lapses); else 0
--          {-1, marker}
--                      held as a semaphore ("group:sem:N"): another kind,
--                      refused rather than waited for
--
-- The fence is the Redis server time in microseconds, or the last fence + 1
-- when that is not below it (several grants in one microsecond, or a clock
-- that stepped back a little). Losing the fence key — DEL, FLUSHALL, a
-- restart without persistence, or its own expiry fence_ttl after the last
-- grant — cannot make fences go backwards unless the Redis clock does: every
-- fence handed out was at most its grant's time plus the grants of that
-- microsecond, long past by then.
--
-- SET ... GET (Redis 6.2) writes the new fence and reads the old one in one
-- call; only when the old one is not below the clock (rare) is a second SET
-- needed. Microseconds since the epoch stay below 2^53, so Lua's doubles hold
-- them exactly; string.format('%.0f') keeps tostring() from writing 1.7e+15.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local t = redis.call('TIME')
    local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local last = tonumber(redis.call('SET', KEYS[2], string.format('%.0f', fence), 'PX', ARGV[3],
                                     'GET') or '0') or 0
    if last >= fence then
        fence = last + 1
        redis.call('SET', KEYS[2], string.format('%.0f', fence), 'PX', ARGV[3])
    end
    if KEYS[3] and redis.call('GET', KEYS[3]) == (ARGV[5] or ARGV[1]) then
        redis.call('DEL', KEYS[3])
    end
    if KEYS[4] then
        redis.call('DEL', KEYS[4])
        redis.call('HSET', KEYS[4], 'token', ARGV[1], 'term', string.format('%.0f', fence),
                   'value', ARGV[6])
        redis.call('PEXPIRE', KEYS[4], ARGV[2])
        if ARGV[7] ~= '' then
            redis.pcall('PUBLISH', ARGV[7], KEYS[4])
        end
    end
    return {1, fence}
end
-- pcall: a key of another type (a list where a lock was expected) is not ours, and
-- stays busy (SET NX leaves it alone) rather than failing the script. A tombstone
-- of rlockd's ("tombstone:" .. token, release_many.lua) is rlockd's too: nobody
-- releases it, it expires, and waiters sleep until then.
local holder = redis.pcall('GET', KEYS[1])
local ours = false
if type(holder) == 'string' and string.sub(holder, 1, 6) == 'group:' then
    -- Held by a group of rlockd's (shared holds, a semaphore), whose releases are
    -- announced. A claim (a waiter's id, kept by whoever set it first until it
    -- lapses) stops new shared holds joining while this request waits.
    if string.sub(holder, 1, 10) == 'group:sem:' then
        return {-1, holder}
    end
    if KEYS[3] and ARGV[4] ~= '0' and holder == 'group:rw' then
        local claimed = redis.call('GET', KEYS[3])
        local claimant = ARGV[5] or ARGV[1]
        if not claimed or claimed == claimant then
            redis.call('SET', KEYS[3], claimant, 'PX', ARGV[4])
        end
    end
    return {0, redis.call('PTTL', KEYS[1]), 2}
end
if type(holder) == 'string' then
    if string.sub(holder, 1, 10) == 'tombstone:' then
        holder = string.sub(holder, 11)
    end
    ours = string.find(holder, '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-8%x%x%x%-[89ab]%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$') ~= nil
end
return {0, redis.call('PTTL', KEYS[1]), ours and 0 or 1}
