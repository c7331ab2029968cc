-- SPDX-License-Identifier: BSD-3-Clause
-- renew.lua: extend many leases in one call, each only if the key still
-- holds its token. A missing key is never recreated, and a lease is never
-- shortened: a key with more time left than the new ttl keeps it.
--
-- KEYS[i]       lock key i
-- ARGV[2i-1]    token expected in KEYS[i]
-- ARGV[2i]      new lease for KEYS[i], in milliseconds; 0 = only check the
--               token (after a failover, for a lease the client times itself).
--               Prefixed with 'L': the lock is an election's leader, whose
--               record KEYS[i]:leader (acquire.lua) expires with the lock:
--               it is lengthened alike (same hash slot: the braces)
--
-- Returns  an array with one entry per key:
--           1  the key holds the token and now expires no sooner than
--              ARGV[2i] ms from now
--           0  the key does not exist (expired, deleted, flushed)
--          -1  the key holds another value (or is not a string)
--
-- Never shortening is what makes an unanswered renew or Extend harmless:
-- whenever it runs, even late, it can only lengthen the key, never cut the
-- validity the daemon counts on. GET goes through pcall so that one foreign
-- key of another type cannot fail the renewal of every other lock in the batch.
local out = {}
for i, key in ipairs(KEYS) do
    local v = redis.pcall('GET', key)
    if type(v) == 'table' and v.err then
        out[i] = -1
    elseif v == ARGV[2 * i - 1] then
        local arg = ARGV[2 * i]
        local leader = string.byte(arg) == 76 -- 'L'
        local ttl = tonumber(leader and string.sub(arg, 2) or arg) or 0
        if ttl > 0 and redis.call('PTTL', key) < ttl then
            redis.call('PEXPIRE', key, ttl)
        end
        if leader then
            -- pcall: a record of another type (or, on a Cluster, one caught in a slot
            -- migration) stays as it is rather than failing the batch; this lock is
            -- renewed all the same.
            local lk = key .. ':leader'
            if redis.pcall('HGET', lk, 'token') == v then
                redis.pcall('PEXPIRE', lk, redis.call('PTTL', key))
            end
        end
        out[i] = 1
    elseif v then
        out[i] = -1
    else
        out[i] = 0
    end
end
return out
