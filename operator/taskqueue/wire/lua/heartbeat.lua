-- heartbeat.lua: refresh this worker's heartbeat deadline, record when its running tasks started,
-- add its service-time totals and wait histograms to the stats hash, and list the workers whose
-- deadline has passed (to be recovered with recover.lua).
-- Time is Redis's own clock (TIME), never the caller's: a worker clock that is off cannot make
-- live peers look dead.
local workers = KEYS[1]      -- workers zset (member: worker id, score: deadline, unix ms)
local stats = KEYS[2]        -- stats hash
local started = KEYS[3]      -- this worker's started string (keys.KeySchema.started)
local worker_id = ARGV[1]
local window_ms = tonumber(ARGV[2])  -- the new deadline, in ms after now
local running = ARGV[3]      -- "ms,ms,...": how long its oldest running tasks have run, oldest
                             -- first ("" when idle); kept as their start times on Redis's clock,
                             -- with the deadline as TTL (a dead worker's goes with it)
local FIRST_FIELD = 4        -- ARGV[4..]: pairs of stats field and integer increment (the
                             -- milliseconds and attempts the worker ran each queue's tasks for
                             -- since its last beat: keys.service_fields and
                             -- keys.service_sq_fields; the waits it measured: keys.wait_fields;
                             -- none when idle)
-- Returns {now (unix ms, Redis clock), {ids of expired workers (never the caller)}}. A key
-- holding another type fails the call before any write (WRONGTYPE naming it).
-- include: entry
-- include: count
local wrong = misfit({workers, 'zset', stats, 'hash', started, 'string'})
if wrong then return wrong end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', workers, now + window_ms, worker_id)
if running == '' then
  redis.call('DEL', started)
else
  local starts = {}
  for ms in string.gmatch(running, '%d+') do
    starts[#starts + 1] = string.format('%.0f', now - tonumber(ms))
  end
  redis.call('SET', started, table.concat(starts, ','), 'PX', window_ms)
end
for i = FIRST_FIELD, #ARGV, 2 do add_count(stats, ARGV[i], ARGV[i + 1]) end
return {now, redis.call('ZRANGEBYSCORE', workers, '-inf', '(' .. now, 'LIMIT', 0, 100)}
