-- observe.lua: everything the operator and `taskqueue stats` read about one TaskQueue, in one call.
-- KEYS[1] workers zset, KEYS[2] delayed zset, KEYS[3] dead-letter list, KEYS[4] stats hash,
-- KEYS[5] quiesced set, KEYS[6..5+N] the N queues in priority order, then the processing lists of
-- the workers the caller expects (the ones it saw last time), in the order of their ids in ARGV.
-- ARGV[1] N, ARGV[2] M, ARGV[3..2+N] the type of each queue ("list" | "zset"), ARGV[3+N..2+N+M]
-- the M per-queue stats fields (keys.KeySchema.queue_counter_fields: taken, service ms, served,
-- squared service ms, attempts squared, wait histograms), ARGV[3+N+M] a horizon (unix ms; "" for
-- none): delayed entries due by then count as due soon, ARGV[4+N+M..] worker ids.
-- Returns {lengths, oldest, {delayed, dead, completed, failed, dead trimmed}, workers,
-- queue_counters, quiesced, scheduled} where oldest is the envelope time of each queue's oldest
-- task ("" when unknown: a raw payload, a malformed time, or 0), workers is a flat list id, heartbeat deadline (ms), processing
-- length, ... with length -1 for a worker whose processing list was not passed in KEYS (the
-- caller then calls again with it: a key is only read when declared, as Redis Cluster requires),
-- queue_counters the M per-queue fields ("" when never written), quiesced the members of
-- KEYS[5], and scheduled is {due by the horizon (0 without one), the earliest due time (ms, ""
-- when none), duplicates skipped}. The layout is documented once more in keys.OBSERVE_REPLY.
-- include: entry
local nq, nf = tonumber(ARGV[1]), tonumber(ARGV[2])
local lengths, oldest = {}, {}
for i = 1, nq do
  local key, kind = KEYS[5 + i], ARGV[2 + i]
  local head
  if kind == 'zset' then
    lengths[i] = redis.call('ZCARD', key)
    head = redis.call('ZRANGE', key, 0, 0)[1]
  else
    lengths[i] = redis.call('LLEN', key)
    head = redis.call('LINDEX', key, -1)
  end
  local t = ''
  if head and string.sub(head, 1, #MARK) == MARK then
    t = string.match(string.sub(head, 1, 96), '"enqueued_at":(%d+%.?%d*)[,}]') or ''
    -- recover.lua wraps raw payloads with "enqueued_at":0: their time is unknown, not 1970
    if not tonumber(t) or tonumber(t) == 0 then t = '' end
  end
  oldest[i] = t
end
local processing = {}
-- the m-th worker id ARGV[3 + N + M + m] goes with KEYS[5 + N + m]
for j = 4 + nq + nf, #ARGV do processing[ARGV[j]] = KEYS[j + 2 - nf] end
local workers = {}
local ids = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #ids, 2 do
  local key = processing[ids[i]]
  workers[#workers + 1] = ids[i]
  workers[#workers + 1] = ids[i + 1]
  workers[#workers + 1] = key and redis.call('LLEN', key) or -1
end
local counters = redis.call('HMGET', KEYS[4], 'completed', 'failed', 'duplicates', DEAD_TRIMMED)
local per_queue = {}
if nf > 0 then
  local raw = redis.call('HMGET', KEYS[4], unpack(ARGV, 3 + nq, 2 + nq + nf))
  for i = 1, nf do per_queue[i] = raw[i] or '' end
end
local horizon = ARGV[3 + nq + nf]
if horizon == '' then horizon = nil end
local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local scheduled = {horizon and redis.call('ZCOUNT', KEYS[2], '-inf', horizon) or 0,
                   head[2] or '', tonumber(counters[3] or '0') or 0}
return {lengths, oldest,
        {redis.call('ZCARD', KEYS[2]), redis.call('LLEN', KEYS[3]),
         tonumber(counters[1] or '0') or 0, tonumber(counters[2] or '0') or 0,
         tonumber(counters[4] or '0') or 0},
        workers, per_queue, redis.call('SMEMBERS', KEYS[5]), scheduled}
