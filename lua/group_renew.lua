-- SPDX-License-Identifier: BSD-3-Clause
-- group_renew.lua: extend many group leases (shared holds, semaphore permits)
-- in one call, each only while its token still has its place. Like renew.lua,
-- a lease is never shortened and a place that is gone is never recreated.
--
-- For entry i (keys and arguments in threes):
-- KEYS[3i-2]   marker key   PREFIX{resource}
-- KEYS[3i-1]   holders key  PREFIX{resource}:holders
-- KEYS[3i]     permits key  PREFIX{resource}:permits
-- ARGV[3i-2]   token
-- ARGV[3i-1]   new lease in ms; 0 = only check that the place is held
-- ARGV[3i]     the group's marker ("group:rw" or "group:sem:N")
--
-- Returns  an array with one entry per lease:
--           1  the token holds its place, which now ends no sooner than
--              ARGV[3i-1] ms from now (and so do the group's keys)
--           0  its place is gone: its lease ended, or the group's keys were
--              deleted (flushed, lost in a failover)
--          -1  the resource is held as something else (another marker, an
--              exclusive token, a key of another type)
--
-- A place whose end has passed is gone even if nobody removed it yet: it may
-- already have been counted free by a group_acquire, so bringing it back
-- would give out one permit too many.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #KEYS / 3 do
    local marker_key, holders, permits = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local token, ttl, marker = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1]), ARGV[3 * i]
    local cur = redis.pcall('GET', marker_key)
    if type(cur) == 'table' or (cur and cur ~= marker) then
        out[i] = -1
    else
        local ends = cur and tonumber(redis.call('ZSCORE', holders, token) or '0') or 0
        if ends <= now then
            out[i] = 0
        else
            if ttl > 0 and ends < now + ttl then
                redis.call('ZADD', holders, now + ttl, token)
                if redis.call('PTTL', marker_key) < ttl then
                    redis.call('PEXPIRE', marker_key, ttl)
                    redis.call('PEXPIRE', holders, ttl)
                    redis.call('PEXPIRE', permits, ttl)
                end
            end
            out[i] = 1
        end
    end
end
return out
