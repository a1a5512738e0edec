-- fetch.lua: ack finished tasks, promote due retries, then take up to COUNT tasks by priority and
-- starvation limits, moving each into the caller's processing list, all in one atomic call.
-- KEYS[1] processing list of the caller, KEYS[2] delayed zset, KEYS[3] starvation hash,
-- KEYS[4] stats hash, KEYS[5] dead-letter list, KEYS[6] quiesced set, KEYS[7] flow control hash,
-- KEYS[8] flow state hash (lib/flow.lua), KEYS[9..] every queue of the TaskQueue in priority order.
-- A caller whose processing list is in KEYS[6] (quiesced by the operator) acks and promotes but
-- takes nothing. Each take adds to the stats field "taken:<queue key>" (keys.TAKEN_FIELD_PREFIX).
-- ARGV[1] dead-letter list's maximum length, ARGV[2] now (unix ms; "" skips promoting due
-- retries in this call), ARGV[3] COUNT (0: ack and promote only), ARGV[4] hold ("1": LPUSH the
-- entries into KEYS[1] (AtLeastOnce); "0": hand them out unheld (AtMostOnce)), ARGV[5] number of
-- acks A, ARGV[6..5+A] processing entries to ack, then per queue: type ("list"|"zset"),
-- starvation limit ("" for none) and take ("1"; "0": the caller skips the queue, its key holds
-- another type).
-- Returns the taken entries "<queue>\n<score>\n<element>" in the order they were taken, then,
-- when a rate limit held a queue back, an integer: the ms until that queue may give its next
-- task. Paused queues give nothing, and rate and in-flight limits cap what each queue gives
-- (lib/flow.lua); priority and starvation limits apply among the tasks the limits allow.
-- Nothing is written before every check passed: each key written holds its type or nothing
-- (else a WRONGTYPE error naming it, and no write), and each due delayed entry is placed
-- (lib/entry.lua `place`): one that cannot go back to its queue goes to the dead-letter list.
-- Starvation counters are fleet-wide: KEYS[3] holds, per queue key, how many tasks in a row were
-- taken from it while a later queue had tasks; at the limit the next task comes from the next
-- non-empty later queue and the counter restarts. Without any limit the queues are simply drained
-- in order (one pop per queue, no length reads).
-- include: entry
-- include: count
-- include: moves
-- include: flow
local max_dead, now, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local hold, nacks = ARGV[4] == '1', tonumber(ARGV[5])
local first_queue_arg = 6 + nacks
local taking = count > 0 and redis.call('SISMEMBER', KEYS[6], KEYS[1]) == 0

local keys, types, limits = {}, {}, {}
local any_limit = false
for i = 9, #KEYS do
  local a = first_queue_arg + (i - 9) * 3
  if ARGV[a + 2] == '1' then
    local n = #keys + 1
    keys[n], types[n], limits[n] = KEYS[i], ARGV[a], tonumber(ARGV[a + 1])
    if limits[n] then any_limit = true end
  end
end

-- the checks: every key this call writes (the first LREM of an ack checks the processing list
-- itself), then every due entry
local flow_on = flow_present(KEYS[7], KEYS[8])
local wrong = wrong_type(KEYS[4], 'hash') or (flow_on and flow_misfit(KEYS[7], KEYS[8]))
if taking then
  if hold and nacks == 0 then wrong = wrong or wrong_type(KEYS[1], 'list') end
  for i = 1, #keys do wrong = wrong or wrong_type(keys[i], types[i]) end
  if any_limit then wrong = wrong or wrong_type(KEYS[3], 'hash') end
end
if wrong then return wrong end
local moves = {}
local due = now and redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1000) or {}
if #due > 0 then
  local queue_set, seen, rejects = queue_types(9, first_queue_arg, 3), {}, false
  for _, entry in ipairs(due) do
    local reason, queue, score, element = place(entry, queue_set, seen)
    moves[#moves + 1] = {entry, reason, queue, score, element}
    rejects = rejects or reason ~= nil
  end
  wrong = rejects and wrong_type(KEYS[5], 'list')
  if wrong then return wrong end
end

if nacks > 0 then
  local acked, gone = 0, {}
  for i = 6, 5 + nacks do
    local n = redis.call('LREM', KEYS[1], -1, ARGV[i])
    acked = acked + n
    if flow_on and n > 0 then flow_tally(gone, ARGV[i]) end
  end
  if acked > 0 then add_count(KEYS[4], 'completed', acked) end
  if flow_on then flow_release(KEYS[8], gone) end
end

-- promote due retries back to the right end of their list (served next) or into their zset
for _, m in ipairs(moves) do
  redis.call('ZREM', KEYS[2], m[1])
  if m[2] then
    reject(KEYS[5], KEYS[4], max_dead, m[3], m[5], m[2])
  else
    put(m[3], m[4], m[5])
  end
end
if not taking then return {} end

local nq = #keys
local out = {}
local flow = flow_on and flow_open(KEYS[7], KEYS[8], keys, hold) or nil
-- pop up to n tasks from queue i into out; returns how many
local function take(i, n)
  if n <= 0 then return 0 end
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
  if got > 0 then add_count(KEYS[4], 'taken:' .. keys[i], got) end
  flow_took(flow, i, got)
  return got
end

if not any_limit then
  -- strict priority: drain the queues in order, one pop per queue at most
  local remaining = count
  for i = 1, nq do
    remaining = remaining - take(i, flow_cap(flow, i, remaining))
    if remaining <= 0 then break end
  end
else
  local lens = {}
  for i = 1, nq do
    if types[i] == 'zset' then lens[i] = redis.call('ZCARD', keys[i])
    else lens[i] = redis.call('LLEN', keys[i]) end
    lens[i] = flow_cap(flow, i, lens[i])
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
local wait = flow and flow_close(flow)
if wait then out[#out + 1] = wait end
return out
