-- tombstone.lua: the end of an unclean session with lock_delay. Instead of
-- deleting the lock, replace the holder's token by a tombstone that nobody
-- holds, for lock_delay ms, so that a holder that was only paused has that
-- long to notice its loss before anyone else can take the lock.
--
-- KEYS[1]  lock key  PREFIX{resource}
-- ARGV[1]  token     the holder's token; nothing happens unless the key holds it
-- ARGV[2]  delay     lock_delay in milliseconds
--
-- Returns  1  the tombstone was written (value "tombstone:" .. token)
--          0  the key holds another value, or does not exist
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], 'tombstone:' .. ARGV[1], 'PX', ARGV[2])
    return 1
end
return 0
