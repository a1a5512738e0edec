-- observe.lua: everything the operator and `taskqueue stats` read about one TaskQueue, in one call.
-- KEYS[1] workers zset, KEYS[2] delayed zset, KEYS[3] dead-letter list, KEYS[4] stats hash,
-- KEYS[5] quiesced set, KEYS[6..5+N] the N queues in priority order, then the processing lists of
-- the workers the caller expects (the ones it saw last time), in the order of their ids in ARGV,
-- then their started strings (keys.KeySchema.started) in the same order.
-- ARGV[1] N, ARGV[2] M, ARGV[3..2+N] the type of each queue ("list" | "zset"), ARGV[3+N..2+N+M]
-- the M per-queue stats fields (keys.KeySchema.queue_counter_fields: taken, service ms, served,
-- squared service ms, attempts squared, wait histograms), ARGV[3+N+M] a horizon (unix ms; "" for
-- none): delayed entries due by then count as due soon, ARGV[4+N+M..] worker ids.
-- Returns {lengths, oldest, {delayed, dead, completed, failed, dead trimmed}, workers,
-- queue_counters, quiesced, scheduled} where oldest is the envelope time of each queue's oldest
-- task ("" when unknown: a raw payload, a malformed time, or 0), workers is a flat list id, heartbeat deadline (ms), processing
-- length, started ("ms,ms,...": when its oldest running tasks started, "" when none or unknown),
-- ... with length -1 for a worker whose processing list was not passed in KEYS (the
-- caller then calls again with it: a key is only read when declared, as Redis Cluster requires),
-- queue_counters the M per-queue fields ("" when never written), quiesced the members of
-- KEYS[5], and scheduled is {due by the horizon (0 without one), the earliest due time (ms, ""
-- when none), duplicates skipped, tasks cancelled}, and wrong: flat (key, type it holds, type expected)* of
-- every key read here that holds another type than its own (it is then read as empty: no
-- worker takes from or writes to it, and one bad key does not blind the whole read). The
-- layout is documented once more in keys.OBSERVE_REPLY.
-- include: entry
local nq, nf = tonumber(ARGV[1]), tonumber(ARGV[2])
local wrong = {}
-- usable(key, kind): true when `key` holds a `kind` or nothing; else noted in `wrong`
local function usable(key, kind)
  local held = type_of(key)
  if held == 'none' or held == kind then return true end
  wrong[#wrong + 1] = key
  wrong[#wrong + 1] = held
  wrong[#wrong + 1] = kind
  return false
end
local lengths, oldest = {}, {}
for i = 1, nq do
  local key, kind = KEYS[5 + i], ARGV[2 + i]
  local head
  if not usable(key, kind) then
    lengths[i] = 0
  elseif kind == 'zset' then
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
local processing, started = {}, {}
-- the m-th of the W worker ids, ARGV[3 + N + M + m], goes with KEYS[5 + N + m] and KEYS[5 + N + W + m]
local nw = #ARGV - (3 + nq + nf)
for j = 4 + nq + nf, #ARGV do
  processing[ARGV[j]] = KEYS[j + 2 - nf]
  started[ARGV[j]] = KEYS[j + 2 - nf + nw]
end
local workers = {}
local ids = usable(KEYS[1], 'zset') and redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES') or {}
for i = 1, #ids, 2 do
  local key = processing[ids[i]]
  workers[#workers + 1] = ids[i]
  workers[#workers + 1] = ids[i + 1]
  workers[#workers + 1] = key and (usable(key, 'list') and redis.call('LLEN', key) or 0) or -1
  local since = started[ids[i]]
  workers[#workers + 1] = since and usable(since, 'string') and redis.call('GET', since) or ''
end
local stats = usable(KEYS[4], 'hash')
local counters = stats and redis.call('HMGET', KEYS[4], 'completed', 'failed', 'duplicates',
                                      DEAD_TRIMMED, 'cancelled') or {}
local per_queue = {}
if nf > 0 then
  local raw = stats and redis.call('HMGET', KEYS[4], unpack(ARGV, 3 + nq, 2 + nq + nf)) or {}
  for i = 1, nf do per_queue[i] = raw[i] or '' end
end
local horizon = ARGV[3 + nq + nf]
if horizon == '' then horizon = nil end
local delayed = usable(KEYS[2], 'zset')
local head = delayed and redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES') or {}
local scheduled = {delayed and horizon and redis.call('ZCOUNT', KEYS[2], '-inf', horizon) or 0,
                   head[2] or '', tonumber(counters[3] or '0') or 0,
                   tonumber(counters[5] or '0') or 0}
return {lengths, oldest,
        {delayed and redis.call('ZCARD', KEYS[2]) or 0,
         usable(KEYS[3], 'list') and redis.call('LLEN', KEYS[3]) or 0,
         tonumber(counters[1] or '0') or 0, tonumber(counters[2] or '0') or 0,
         tonumber(counters[4] or '0') or 0},
        workers, per_queue,
        usable(KEYS[5], 'set') and redis.call('SMEMBERS', KEYS[5]) or {}, scheduled, wrong}
