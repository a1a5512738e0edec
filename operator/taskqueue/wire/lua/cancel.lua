-- cancel.lua: cancel a task by id (`taskqueue cancel`, client.cancel). A queued or delayed task
-- is dropped when a fetch takes it (fetch.lua); a running one is stopped by its worker, told on
-- the cancel channel (PUBLISH; a worker that reconnects reads the zset).
-- KEYS[1] cancels zset, KEYS[2] the task's index hash (spec.worker.tracking).
-- ARGV[1] task id, ARGV[2] how long the cancel is kept (ms; a task not seen by then runs),
-- ARGV[3] the cancel channel.
-- Returns {state the index knows ("" when untracked or expired), 1 when the cancel was recorded
-- (0: the task had already finished: done, dead or cancelled), workers told}.
-- include: entry
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local wrong = misfit({KEYS[1], 'zset', KEYS[2], 'hash'})
if wrong then return wrong end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local state = redis.call('HGET', KEYS[2], 'state') or ''
if state == 'done' or state == 'dead' or state == 'cancelled' then return {state, 0, 0} end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return {state, 1, redis.call('PUBLISH', ARGV[3], ARGV[1])}
