-- heartbeat.lua: refresh this worker's heartbeat deadline and list the workers whose deadline
-- has passed (to be recovered with recover.lua).
-- KEYS[1] workers zset. ARGV[1] worker id, ARGV[2] new deadline (unix ms), ARGV[3] now (unix ms).
-- Returns the ids of expired workers (never the caller).
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3], 'LIMIT', 0, 100)
