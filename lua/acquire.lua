-- acquire.lua: take a lock exactly as `SET key token NX PX ttl` does, and
-- hand out a fencing token.
--
-- KEYS[1]  lock key   PREFIX{resource}        value = holder's token
-- KEYS[2]  fence key  PREFIX{resource}:fence  per-resource counter
-- ARGV[1]  token      the new holder's token (a UUID string)
-- ARGV[2]  ttl_ms     lease in milliseconds
--
-- Returns  {1, fence}  granted; fence is strictly greater than every fence
--                      handed out before for this resource
--          {0, pttl}   held by another token; pttl is its remaining lease in
--                      ms (-1: the key has no expiry)
--
-- The fence is the counter's INCR raised to at least the Redis server time in
-- microseconds, so losing the counter key (DEL, FLUSHALL, a restart without
-- persistence) cannot make it go backwards unless the Redis clock does.
-- Microseconds since the epoch stay below 2^53, so Lua's doubles hold them
-- exactly; string.format('%.0f') keeps tostring() from writing 1.7e+15.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local fence = redis.call('INCR', KEYS[2])
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if fence < now then
        fence = now
        redis.call('SET', KEYS[2], string.format('%.0f', now))
    end
    return {1, fence}
end
return {0, redis.call('PTTL', KEYS[1])}
