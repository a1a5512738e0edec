-- fetch.lua: ack finished tasks, promote due retries, then take up to COUNT tasks by priority and
-- starvation limits, moving each into the caller's processing list, all in one atomic call.
-- KEYS[1] processing list of the caller, KEYS[2] delayed zset, KEYS[3] starvation hash,
-- KEYS[4] stats hash, KEYS[5] dead-letter list (a due retry whose queue left the spec),
-- KEYS[6] quiesced set, KEYS[7..] the queues in priority order.
-- A caller whose processing list is in KEYS[6] (quiesced by the operator) acks and promotes but
-- takes nothing. Each take adds to the stats field "taken:<queue key>" (keys.TAKEN_FIELD_PREFIX).
-- ARGV[1] now (unix ms; "" skips promoting due retries in this call), ARGV[2] COUNT (0: ack and
-- promote only), ARGV[3] hold ("1": LPUSH the entries into KEYS[1] (AtLeastOnce); "0": hand them
-- out unheld (AtMostOnce)), ARGV[4] number of acks A, ARGV[5..4+A] processing entries to ack, then per queue: type ("list"|"zset") and
-- starvation limit ("" for none).
-- Returns the taken entries "<queue>\n<score>\n<element>" in the order they were taken.
-- Starvation counters are fleet-wide: KEYS[3] holds, per queue key, how many tasks in a row were
-- taken from it while a later queue had tasks; at the limit the next task comes from the next
-- non-empty later queue and the counter restarts. Without any limit the queues are simply drained
-- in order (one pop per queue, no length reads).
-- include: entry
local queue_set = key_set(7)
local now, count, hold = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local nacks = tonumber(ARGV[4])
if nacks > 0 then
  local acked = 0
  for i = 5, 4 + nacks do
    acked = acked + redis.call('LREM', KEYS[1], -1, ARGV[i])
  end
  if acked > 0 then redis.call('HINCRBY', KEYS[4], 'completed', acked) end
end

-- promote due retries back to the right end of their list (served next) or into their zset
if now then
  local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1000)
  for _, entry in ipairs(due) do
    redis.call('ZREM', KEYS[2], entry)
    put_back(entry, queue_set, KEYS[5])
  end
end
if count <= 0 then return {} end
if redis.call('SISMEMBER', KEYS[6], KEYS[1]) == 1 then return {} end

local nq = #KEYS - 6
local keys, types, limits = {}, {}, {}
local any_limit = false
for i = 1, nq do
  keys[i] = KEYS[6 + i]
  types[i] = ARGV[4 + nacks + 2 * i - 1]
  limits[i] = tonumber(ARGV[4 + nacks + 2 * i])
  if limits[i] then any_limit = true end
end

local out = {}
-- pop up to n tasks from queue i into out; returns how many
local function take(i, n)
  local before = #out
  if types[i] == 'zset' then
    local popped = redis.call('ZPOPMIN', keys[i], n)
    for k = 1, #popped, 2 do
      out[#out + 1] = join_entry(keys[i], popped[k + 1], popped[k])
    end
  else
    local popped = redis.call('RPOP', keys[i], n)
    if popped then
      for k = 1, #popped do out[#out + 1] = join_entry(keys[i], '', popped[k]) end
    end
  end
  local got = #out - before
  if got > 0 then redis.call('HINCRBY', KEYS[4], 'taken:' .. keys[i], got) end
  return got
end

if not any_limit then
  -- strict priority: drain the queues in order, one pop per queue at most
  local remaining = count
  for i = 1, nq do
    remaining = remaining - take(i, remaining)
    if remaining <= 0 then break end
  end
else
  local lens = {}
  for i = 1, nq do
    if types[i] == 'zset' then lens[i] = redis.call('ZCARD', keys[i])
    else lens[i] = redis.call('LLEN', keys[i]) end
  end
  local counts = {}
  local raw = redis.call('HMGET', KEYS[3], unpack(keys))
  for i = 1, nq do counts[i] = tonumber(raw[i]) or 0 end

  local function next_nonempty(after)
    for j = after + 1, nq do
      if lens[j] > 0 then return j end
    end
    return nil
  end

  local remaining = count
  while remaining > 0 do
    local i = next_nonempty(0)
    if not i then break end
    local later = next_nonempty(i)
    while later and limits[i] and counts[i] >= limits[i] do
      counts[i] = 0
      i = later
      later = next_nonempty(i)
    end
    local n = math.min(remaining, lens[i])
    if later and limits[i] then n = math.min(n, limits[i] - counts[i]) end
    take(i, n)
    lens[i] = lens[i] - n
    remaining = remaining - n
    for k = 1, i - 1 do counts[k] = 0 end
    if later then counts[i] = counts[i] + n else counts[i] = 0 end
  end
  local flat = {}
  for i = 1, nq do flat[#flat + 1] = keys[i]; flat[#flat + 1] = counts[i] end
  redis.call('HSET', KEYS[3], unpack(flat))
end
if hold and #out > 0 then redis.call('LPUSH', KEYS[1], unpack(out)) end
return out
