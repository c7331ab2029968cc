-- SPDX-License-Identifier: BSD-3-Clause
-- group_release.lua: give up group places (shared holds, semaphore permits),
-- each only if its token still has one, and announce what may let a waiter in.
--
-- For entry i (keys in threes, arguments in twos):
-- KEYS[3i-2]   marker key   PREFIX{resource}
-- KEYS[3i-1]   holders key  PREFIX{resource}:holders
-- KEYS[3i]     permits key  PREFIX{resource}:permits
-- ARGV[2i-1]   token
-- ARGV[2i]     lock_delay in ms: 0 gives the place up now; more keeps it
--              taken (and its permits counted) for that long under the name
--              "tombstone:" .. token, nobody's — the group's form of a
--              tombstone: a late renewal, a retried acquire or an adopt of
--              token no longer finds it (a delay shorter than the place's time
--              left cuts it: it is a delay, not a lease)
-- ARGV[2n+1]   (optional) channel suffix: a release is published on
--              KEYS[3i-2] .. suffix ('' or absent = no notices)
--
-- Returns  an array with one entry per place:
--           1  the token had its place, now given up (or delayed)
--           0  it had none (its lease ended, the keys are gone, another kind)
--
-- The last place given up deletes the group's keys, so the resource is free
-- for every kind, the copied SET NX scripts included. Otherwise the keys are
-- cut to the latest remaining lease end (which is never shorter than any
-- lease still promised). Every release is announced: a semaphore's waiter may
-- fit in one freed permit, and an exclusive waiter waits for the last.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS / 3
local suffix = ARGV[2 * n + 1]
local notify = suffix ~= nil and suffix ~= ''
local out = {}
for i = 1, n do
    local marker_key, holders, permits = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local token, delay = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
    local cur = redis.pcall('GET', marker_key)
    local ends = tonumber(redis.call('ZSCORE', holders, token) or '0')
    if type(cur) ~= 'string' or string.sub(cur, 1, 6) ~= 'group:' or ends <= now then
        out[i] = 0
    else
        if delay > 0 then
            redis.call('ZREM', holders, token)
            redis.call('ZADD', holders, now + delay, 'tombstone:' .. token)
            local had = redis.call('HGET', permits, token)
            if had then
                redis.call('HDEL', permits, token)
                redis.call('HSET', permits, 'tombstone:' .. token, had)
            end
        else
            redis.call('ZREM', holders, token)
            local had = redis.call('HGET', permits, token)
            if had then
                redis.call('HINCRBY', permits, 'used', -tonumber(had))
                redis.call('HDEL', permits, token)
            end
        end
        local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
        if #last == 0 then
            redis.call('DEL', marker_key, holders, permits)
        else
            local life = math.max(1, tonumber(last[2]) - now)
            redis.call('PEXPIRE', marker_key, life)
            redis.call('PEXPIRE', holders, life)
            redis.call('PEXPIRE', permits, life)
        end
        if notify then
            redis.pcall('PUBLISH', marker_key .. suffix, marker_key)
        end
        out[i] = 1
    end
end
return out
