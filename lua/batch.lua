-- SPDX-License-Identifier: BSD-3-Clause
-- batch.lua: several script calls for one Redis connection, made in one loop
-- turn by different requests, run as one script call (daemon/redis/batch.c).
-- A script call costs Redis a fixed price (parsing, the script's lookup and
-- its Lua state set up) beyond its own commands; a batch pays it once.
--
-- BATCHED: acquire release
-- The scripts named on the line above are compiled into this one at build
-- time (cmake/embed.cmake): each one's text becomes the body of a function
-- taking its own KEYS and ARGV, kept in the table `scripts` by name, so that
-- a call in a batch runs exactly the code it runs alone.
--
-- KEYS     every call's keys, call after call
-- ARGV[1]  n: how many calls
-- ARGV[2 + 3(i-1)], ARGV[3 + 3(i-1)], ARGV[4 + 3(i-1)]
--          call i's script name, number of keys, number of other arguments
-- then     every call's other arguments, call after call
--
-- Returns  an array of n answers, the i-th for call i, as that call alone
--          would have had it. A call that raises an error (a key of the wrong
--          type, a command refused) answers that error and leaves the other
--          calls alone, as it would alone: what it wrote before the error
--          stays, which is why the caller treats an error as an unknown
--          outcome. A missing answer (nil) becomes a nil reply, never a
--          shorter array, so that answer i is always call i's.
local n = tonumber(ARGV[1])
local out = {}
local ki, ai = 0, 1 + 3 * n
for i = 1, n do
    local h = 3 * (i - 1)
    local fn = scripts[ARGV[2 + h]]
    local nk, na = tonumber(ARGV[3 + h]), tonumber(ARGV[4 + h])
    local keys, args = {}, {}
    for j = 1, nk do
        keys[j] = KEYS[ki + j]
    end
    for j = 1, na do
        args[j] = ARGV[ai + j]
    end
    ki, ai = ki + nk, ai + na
    local ok, r
    if fn then
        ok, r = pcall(fn, keys, args)
    else
        ok, r = false, 'ERR batch: no script ' .. tostring(ARGV[2 + h])
    end
    if not ok then
        r = {err = tostring(r)}
    elseif r == nil then
        r = false
    end
    out[i] = r
end
return out
