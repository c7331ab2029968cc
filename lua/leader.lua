-- SPDX-License-Identifier: BSD-3-Clause
-- leader.lua: who leads an election (docs/protocol.md §6.11).
--
-- KEYS[1]  lock key    PREFIX{election}
-- KEYS[2]  leader key  PREFIX{election}:leader  HASH token, term, value
--                      (written by acquire.lua at a campaign's grant)
--
-- Returns  {1, term, value, pttl}
--                      the lock's key holds the token the record names: that
--                      candidate leads, in term (a decimal string: the grant's
--                      fence), with pttl ms left on its lease
--          {0}         nobody leads: the key is free, or held by something
--                      that is not a leader (a plain lock, a tombstone, a
--                      leader that lost its key)
--
-- Reading the record through the key's token is what makes it exact: a
-- record outlives neither its leader's key (it expires with it) nor its token
-- (a new grant or an adopt writes the token anew).
-- pcall: a record or lock key of another type is no leader's.
local rec = redis.pcall('HMGET', KEYS[2], 'token', 'term', 'value')
if type(rec) ~= 'table' or rec.err or not rec[1] or not rec[2] then
    return {0}
end
if redis.pcall('GET', KEYS[1]) == rec[1] then
    return {1, rec[2], rec[3] or '', redis.call('PTTL', KEYS[1])}
end
return {0}
