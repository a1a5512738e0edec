-- observe.lua: everything the operator and `taskqueue stats` read about one TaskQueue, in one call.
-- KEYS[1] workers zset, KEYS[2] delayed zset, KEYS[3] dead-letter list, KEYS[4] stats hash,
-- KEYS[5..4+N] the N queues in priority order, then the processing lists of the workers the
-- caller expects (the ones it saw last time), in the order of their ids in ARGV.
-- ARGV[1] N, ARGV[2..1+N] the type of each queue ("list" | "zset"), ARGV[2+N..] worker ids.
-- Returns {lengths, oldest, {delayed, dead, completed, failed}, workers} where oldest is the
-- envelope time of each queue's oldest task ("" when unknown: a raw payload, or 0) and workers
-- is a flat list id, heartbeat deadline (ms), processing length, ... with length -1 for a worker
-- whose processing list was not passed in KEYS (the caller then calls again with it: a key is
-- only read when declared, as Redis Cluster requires).
local nq = tonumber(ARGV[1])
local lengths, oldest = {}, {}
for i = 1, nq do
  local key, kind = KEYS[4 + i], ARGV[1 + i]
  local head
  if kind == 'zset' then
    lengths[i] = redis.call('ZCARD', key)
    head = redis.call('ZRANGE', key, 0, 0)[1]
  else
    lengths[i] = redis.call('LLEN', key)
    head = redis.call('LINDEX', key, -1)
  end
  local t = ''
  if head then
    t = string.match(string.sub(head, 1, 96), '"enqueued_at":([%d%.]+)') or ''
    -- recover.lua wraps raw payloads with "enqueued_at":0: their time is unknown, not 1970
    if tonumber(t) == 0 then t = '' end
  end
  oldest[i] = t
end
local processing = {}
-- the m-th worker id ARGV[1 + N + m] goes with KEYS[4 + N + m]
for j = 2 + nq, #ARGV do processing[ARGV[j]] = KEYS[3 + j] end
local workers = {}
local ids = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #ids, 2 do
  local key = processing[ids[i]]
  workers[#workers + 1] = ids[i]
  workers[#workers + 1] = ids[i + 1]
  workers[#workers + 1] = key and redis.call('LLEN', key) or -1
end
local counters = redis.call('HMGET', KEYS[4], 'completed', 'failed')
return {lengths, oldest,
        {redis.call('ZCARD', KEYS[2]), redis.call('LLEN', KEYS[3]),
         tonumber(counters[1] or '0') or 0, tonumber(counters[2] or '0') or 0},
        workers}
