-- SPDX-License-Identifier: BSD-3-Clause
-- release_many.lua: free many locks in one call, each only if its key still
-- holds the given token (a session's end, an orphaned grant, shutdown, a
-- forced release), and announce each one freed to waiters in other daemons.
--
-- KEYS[i]       lock key i
-- ARGV[2i-1]    token expected in KEYS[i]
-- ARGV[2i]      lock_delay in milliseconds: '0' deletes the key; more replaces
--               the token by a tombstone ("tombstone:" .. token) that nobody
--               holds, expiring after that long
-- ARGV[2n+1]    (optional) channel suffix: each key deleted or tombstoned is
--               published on KEYS[i] .. suffix ('' or absent = no notices);
--               rlockd passes ':free'
--
-- Returns  an array with one entry per key:
--           1  the key held the token and was deleted (or tombstoned)
--           0  the key holds another value (of any type), or does not exist
--
-- GET goes through pcall so that one foreign key of another type cannot fail
-- the release of every other lock in the batch; PUBLISH too, so that a user
-- not allowed to publish still releases. A tombstone is announced as well:
-- the lock is not free yet, but waiters elsewhere sleep until the PTTL of
-- the holder's key, which may be far later than the tombstone's; the notice
-- makes them look again and sleep until the tombstone expires instead.
local n = #KEYS
local suffix = ARGV[2 * n + 1]
local notify = suffix ~= nil and suffix ~= ''
local out = {}
for i, key in ipairs(KEYS) do
    local token = ARGV[2 * i - 1]
    if redis.pcall('GET', key) == token then
        local delay = tonumber(ARGV[2 * i])
        if delay > 0 then
            redis.call('SET', key, 'tombstone:' .. token, 'PX', delay)
        else
            redis.call('DEL', key)
        end
        if notify then
            redis.pcall('PUBLISH', key .. suffix, key)
        end
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
