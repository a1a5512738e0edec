-- fetch.lua: ack finished tasks, promote due retries, then take up to `count` tasks by priority
-- and starvation limits, moving each into the caller's processing list, all in one atomic call.
-- A caller whose processing list is in the quiesced set (the operator is removing it) acks and
-- promotes but takes nothing. Each take adds to the stats field "taken:<queue key>"
-- (keys.TAKEN_FIELD_PREFIX); the tasks a limit or pause held back from this call, to
-- "limited:<queue key>" (keys.LIMITED_FIELD_PREFIX; only while flow control exists).
local processing = KEYS[1]   -- the caller's processing list
local delayed = KEYS[2]      -- delayed zset (retries and scheduled tasks)
local starvation = KEYS[3]   -- starvation counters hash
local stats = KEYS[4]        -- stats hash
local dead_letter = KEYS[5]  -- dead-letter list
local quiesced = KEYS[6]     -- quiesced set (processing lists that take nothing)
local flow = KEYS[7]         -- flow control hash (lib/flow.lua: limits and pauses)
local flow_state = KEYS[8]   -- flow state hash (rate-limit times, tasks in flight)
local cancels = KEYS[9]      -- cancelled task ids (lib/lifecycle.lua): dropped, never handed out
local FIRST_QUEUE = 10       -- KEYS[10..]: every queue of the TaskQueue, in priority order
local max_dead = tonumber(ARGV[1])  -- the dead-letter list's maximum length
local queue_options = ARGV[2]       -- per queue, in KEYS order and space-separated,
                                     -- "<type>:<starvation limit or empty>:<take>" (type "list" |
                                     -- "zset"; take "0": the caller skips the queue, its key
                                     -- holds another type), e.g. "list:3:1 zset::1"
local now = tonumber(ARGV[3])       -- unix ms on Redis's clock; "" skips the promotion
local count = tonumber(ARGV[4])     -- tasks to take (0: ack and promote only)
local hold = ARGV[5] == '1'         -- "1": LPUSH the entries into `processing` (AtLeastOnce);
                                     -- "0": hand them out unheld (AtMostOnce), and the acks
                                     -- are not held either: they only say which tasks are
                                     -- done, for the task index
local task_prefix = ARGV[6]         -- the task index's key prefix ("": tracking off); with it,
                                     -- taken tasks are tracked as running, acked ones as done,
                                     -- promoted ones as queued
local FIRST_ACK = 7                 -- ARGV[7..]: processing entries to ack
-- Returns the taken entries "<queue>\n<score>\n<element>" in the order they were taken, then,
-- when a rate limit held a queue back, an integer: the ms until that queue may give its next
-- task. Paused queues give nothing, and rate and in-flight limits cap what each queue gives
-- (lib/flow.lua); priority and starvation limits apply among the tasks the limits allow.
-- Nothing is written before every check passed: each key written holds its type or nothing
-- (else a WRONGTYPE error naming it, and no write), and each due delayed entry is placed
-- (lib/entry.lua `place`): one that cannot go back to its queue goes to the dead-letter list.
-- Starvation counters are fleet-wide: `starvation` holds, per queue key, how many tasks in a row
-- were taken from it while a later queue had tasks; at the limit the next task comes from the
-- next non-empty later queue and the counter restarts. Without any limit the queues are simply
-- drained in order (one pop per queue, no length reads).
-- include: entry
-- include: count
-- include: moves
-- include: flow
-- include: index
-- include: lifecycle
-- deferred: place reject put track_moved split_entry task_id track now_ms drop_cancelled
-- deferred: flow_open flow_close flow_tally flow_release
local nacks = #ARGV - FIRST_ACK + 1
local taking = count > 0 and redis.call('SISMEMBER', quiesced, processing) == 0

local OPTION = '(%a+):(%d*):([01])'  -- one queue's word of `queue_options`

-- the queues to take from, in priority order: `keys`, `types`, `limits` (none when not taking)
local keys, types, limits = {}, {}, {}
local any_limit = false
if taking then
  local key_index = FIRST_QUEUE
  for kind, limit, take in string.gmatch(queue_options, OPTION) do
    if take == '1' then
      local n = #keys + 1
      keys[n], types[n], limits[n] = KEYS[key_index], kind, tonumber(limit)
      if limits[n] then any_limit = true end
    end
    key_index = key_index + 1
  end
end

-- {queue key = type} of every declared queue, skipped ones too (where a due entry may go back)
local function declared_types()
  local declared, k = {}, FIRST_QUEUE
  for kind in string.gmatch(queue_options, OPTION) do
    declared[KEYS[k]] = kind
    k = k + 1
  end
  return declared
end

-- the checks: every key this call writes (the first LREM of an ack checks the processing list
-- itself), then every due entry
-- the optional keys: flow control (lib/flow.lua) and the cancels (lib/lifecycle.lua) cost one
-- EXISTS of all three when none exists (no flow hash, no cancel pending): nothing more of them
-- is read or written, and what a writer adds is seen by the next fetch of every worker
local optional = redis.call('EXISTS', flow, flow_state, cancels) > 0
local flow_on = optional and flow_present(flow, flow_state)
local wrong = wrong_type(stats, 'hash') or (flow_on and flow_misfit(flow, flow_state))
if taking then
  if hold and nacks == 0 then wrong = wrong or wrong_type(processing, 'list') end
  for q = 1, #keys do wrong = wrong or wrong_type(keys[q], types[q]) end
  if any_limit then wrong = wrong or wrong_type(starvation, 'hash') end
  if optional then wrong = wrong or wrong_type(cancels, 'zset') end
end
if wrong then return wrong end
local moves = {}
local due = now and redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 1000) or {}
-- the definitions only flow control, cancels, tracking and due entries use (lib/*.lua, the
-- `-- deferred:` lines) are built only when one of them is on: a plain fetch does not pay them
if optional or task_prefix ~= '' or #due > 0 then load_deferred() end
if #due > 0 then
  local declared, seen, rejects = declared_types(), {}, false
  for _, entry in ipairs(due) do
    local reason, queue, score, element = place(entry, declared, seen)
    moves[#moves + 1] = {entry, reason, queue, score, element}
    rejects = rejects or reason ~= nil
  end
  wrong = rejects and wrong_type(dead_letter, 'list')
  if wrong then return wrong end
end

if nacks > 0 and not hold then
  local done = {}
  for a = FIRST_ACK, #ARGV do done[#done + 1] = ARGV[a] end
  track_entries(task_prefix, done, 'done')
elseif nacks > 0 then
  local acked, gone, done = 0, {}, {}
  for a = FIRST_ACK, #ARGV do
    local n = redis.call('LREM', processing, -1, ARGV[a])
    acked = acked + n
    if flow_on and n > 0 then flow_tally(gone, ARGV[a]) end
    if n > 0 then done[#done + 1] = ARGV[a] end
  end
  track_entries(task_prefix, done, 'done')
  if acked > 0 then add_count(stats, 'completed', acked) end
  if flow_on then flow_release(flow_state, gone) end
end

-- promote due retries back to the right end of their list (served next) or into their zset
for _, m in ipairs(moves) do
  redis.call('ZREM', delayed, m[1])
  if m[2] then
    local record = reject(dead_letter, stats, max_dead, m[3], m[5], m[2])
    track_moved(task_prefix, m[5], 'dead', m[3], record)
  else
    put(m[3], m[4], m[5])
    track_moved(task_prefix, m[5], 'queued', m[3])
  end
end
if not taking then return {} end

local nq = #keys
local out = {}
local limits_now = flow_on and flow_open(flow, flow_state, keys, hold) or nil
-- the length of queue q (read only where a limit may have held tasks back)
local function length(q)
  if types[q] == 'zset' then return redis.call('ZCARD', keys[q]) end
  return redis.call('LLEN', keys[q])
end

-- count the tasks of queue q its limits held back: `wanted` could have been taken, `cap` were
-- allowed ("limited:<queue>")
local function held_back(q, wanted, cap)
  if cap < wanted then add_count(stats, 'limited:' .. keys[q], wanted - cap) end
end

-- pop up to n tasks from queue q into out; returns how many
local function take(q, n)
  if n <= 0 then return 0 end
  local before = #out
  if types[q] == 'zset' then
    local popped = redis.call('ZPOPMIN', keys[q], n)
    for k = 1, #popped, 2 do
      out[#out + 1] = join_entry(keys[q], popped[k + 1], popped[k])
    end
  else
    local popped = redis.call('RPOP', keys[q], n)
    if popped then
      for k = 1, #popped do out[#out + 1] = join_entry(keys[q], '', popped[k]) end
    end
  end
  local got = #out - before
  if got > 0 then add_count(stats, 'taken:' .. keys[q], got) end
  flow_took(limits_now, q, got)
  return got
end

if not any_limit then
  -- strict priority: drain the queues in order, one pop per queue at most
  local remaining = count
  for q = 1, nq do
    local n = flow_cap(limits_now, q, remaining)
    if n < remaining then held_back(q, math.min(remaining, length(q)), n) end
    remaining = remaining - take(q, n)
    if remaining <= 0 then break end
  end
else
  local lens = {}
  for q = 1, nq do
    local len = length(q)
    lens[q] = flow_cap(limits_now, q, len)
    held_back(q, math.min(len, count), lens[q])
  end
  local counts = {}
  local raw = redis.call('HMGET', starvation, unpack(keys))
  for q = 1, nq do counts[q] = tonumber(raw[q]) or 0 end

  local function next_nonempty(after)
    for j = after + 1, nq do
      if lens[j] > 0 then return j end
    end
    return nil
  end

  local remaining = count
  while remaining > 0 do
    local q = next_nonempty(0)
    if not q then break end
    local later = next_nonempty(q)
    while later and limits[q] and counts[q] >= limits[q] do
      counts[q] = 0
      q = later
      later = next_nonempty(q)
    end
    local n = math.min(remaining, lens[q])
    if later and limits[q] then n = math.min(n, limits[q] - counts[q]) end
    take(q, n)
    lens[q] = lens[q] - n
    remaining = remaining - n
    for k = 1, q - 1 do counts[k] = 0 end
    if later then counts[q] = counts[q] + n else counts[q] = 0 end
  end
  local flat = {}
  for q = 1, nq do flat[#flat + 1] = keys[q]; flat[#flat + 1] = counts[q] end
  redis.call('HSET', starvation, unpack(flat))
end
local dropped = {}
if optional then out, dropped = drop_cancelled(cancels, stats, out, task_prefix) end
track_entries(task_prefix, out, 'running', processing)
if hold and #out > 0 then redis.call('LPUSH', processing, unpack(out)) end
local wait = limits_now and flow_close(limits_now)
if limits_now and hold and #dropped > 0 then  -- cancelled at fetch: not in flight after all
  local gone = {}
  for _, e in ipairs(dropped) do flow_tally(gone, e) end
  flow_release(flow_state, gone)
end
if wait then out[#out + 1] = wait end
return out
