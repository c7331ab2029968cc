-- SPDX-License-Identifier: BSD-3-Clause
-- release.lua: compare-and-delete, the same check as the classic unlock
-- script, plus an optional release notice for waiters in other daemons.
--
-- KEYS[1]  lock key  PREFIX{resource}
-- ARGV[1]  token     the holder's token; the key is deleted only if it matches
-- ARGV[2]  channel   where to PUBLISH the lock key after a delete ('' = none);
--                    rlockd passes PREFIX{resource}:free
--
-- Returns  1  the key held this token and was deleted
--          0  the key holds another token, or does not exist
--
-- The notice goes through pcall: a Redis user not allowed to publish (ACL)
-- still releases, and waiters elsewhere fall back to their holder's-ttl timer.
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    if ARGV[2] ~= nil and ARGV[2] ~= '' then
        redis.pcall('PUBLISH', ARGV[2], KEYS[1])
    end
    return 1
end
return 0
