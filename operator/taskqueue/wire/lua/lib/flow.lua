-- lib/flow.lua (included by `-- include: flow`, after lib/entry.lua): flow control of a
-- TaskQueue's queues for the whole fleet, inside the scripts that take and give back tasks.
-- Two hashes (taskqueue.wire.flow owns their fields in Python):
--   control `<prefix>:flow`, written by the operator (spec.queues[]) and `taskqueue pause`:
--     rate:<queue> "<tasks> <perSeconds> <burst>", max:<queue> N, paused:<queue> (the spec's)
--     and paused-cli:<queue> (`taskqueue pause`'s): a queue is paused while either is there;
--   state `<prefix>:flowstate`, written only here: tat:<queue> the rate limit's theoretical
--     arrival time (unix ms, Redis clock), held:<queue> the queue's tasks in processing lists.
-- The rate limit is GCRA: one number per queue (no refill writes, exact with fractional
-- periods); a task may start when tat - now <= (burst - 1) * period, and each task taken moves
-- tat on by one period. So at most `burst` tasks start at once and at most tasks + burst - 1 in
-- any perSeconds window. When neither hash exists (no queue has a limit or a pause) a script
-- does one EXISTS and nothing else (fetch.lua one EXISTS of them and the cancels zset).

-- flow_present(control, state): whether either hash exists (one EXISTS for both).
local function flow_present(control, state)
  return redis.call('EXISTS', control, state) > 0
end

-- flow_misfit(control, state): the WRONGTYPE error of either key, or nil (before any write).
local function flow_misfit(control, state)
  return wrong_type(control, 'hash') or wrong_type(state, 'hash')
end

-- flow_rate(text) -> period ms, tolerance ms; nil for a missing or unreadable rate.
local function flow_rate(text)
  if not text then return nil end
  local tasks, per, burst = string.match(text, '^(%d+) ([%d.]+) (%d+)$')
  tasks, per, burst = tonumber(tasks), tonumber(per), tonumber(burst)
  if not tasks or tasks < 1 or not per or per <= 0 or not burst or burst < 1 then return nil end
  local period = per * 1000 / tasks
  return period, (burst - 1) * period
end

local function flow_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- flow_open(control, state, queues, hold): the limits of `queues` (keys in priority order) as
-- they stand now: per queue index the tasks it may give (`cap`, nil: no limit). In-flight
-- limits count held tasks only (`hold`: the caller keeps them in its processing list).
local function flow_open(control, state, queues, hold)
  local n = #queues
  local fields = {}
  for i = 1, n do
    fields[4 * i - 3] = 'paused:' .. queues[i]
    fields[4 * i - 2] = 'paused-cli:' .. queues[i]
    fields[4 * i - 1] = 'rate:' .. queues[i]
    fields[4 * i] = 'max:' .. queues[i]
  end
  local raw = redis.call('HMGET', control, unpack(fields))
  local f = {state = state, queues = queues, cap = {}, period = {}, tau = {}, tat = {},
    allowed = {}, max = {}, took = {}}
  local reads = {}
  for i = 1, n do
    if raw[4 * i - 3] or raw[4 * i - 2] then
      f.cap[i] = 0
    else
      local period, tau = flow_rate(raw[4 * i - 1])
      if period then
        f.period[i], f.tau[i] = period, tau
        reads[#reads + 1] = 'tat:' .. queues[i]
      end
      local max = hold and tonumber(raw[4 * i])
      if max then
        f.max[i] = max
        reads[#reads + 1] = 'held:' .. queues[i]
      end
    end
  end
  if #reads == 0 then return f end
  local values = redis.call('HMGET', state, unpack(reads))
  local now = flow_now()
  f.now = now
  local r = 0
  for i = 1, n do
    if f.period[i] then
      r = r + 1
      local tat = math.max(tonumber(values[r]) or now, now)
      local allowed = 0
      if tat - now <= f.tau[i] then
        allowed = math.floor((now + f.tau[i] - tat) / f.period[i]) + 1
      end
      f.tat[i], f.allowed[i], f.cap[i] = tat, allowed, allowed
    end
    if f.max[i] then
      r = r + 1
      local room = math.max(0, f.max[i] - (tonumber(values[r]) or 0))
      f.cap[i] = math.min(f.cap[i] or room, room)
    end
  end
  return f
end

-- flow_cap(f, i, n): at most `n` tasks of queue i, as its limits allow.
local function flow_cap(f, i, n)
  if not f or not f.cap[i] then return n end
  return math.min(n, f.cap[i])
end

-- flow_took(f, i, got): `got` tasks were taken from queue i.
local function flow_took(f, i, got)
  if f and got > 0 then
    f.took[i] = (f.took[i] or 0) + got
    if f.cap[i] then f.cap[i] = f.cap[i] - got end
  end
end

-- flow_close(f): write what was taken (tat, held); the wait in ms until a rate-limited queue
-- whose allowance this call used up, and which still has tasks, may give its next task (nil
-- when none did).
local function flow_close(f)
  local writes, wait = {}, nil
  for i, got in pairs(f.took) do
    local q = f.queues[i]
    if f.period[i] then
      local tat = f.tat[i] + got * f.period[i]
      writes[#writes + 1] = 'tat:' .. q
      writes[#writes + 1] = string.format('%.3f', tat)
    end
    if f.max[i] then redis.call('HINCRBY', f.state, 'held:' .. q, got) end
  end
  for i, allowed in pairs(f.allowed) do
    if (f.took[i] or 0) >= allowed and redis.call('EXISTS', f.queues[i]) == 1 then
      local tat = f.tat[i] + (f.took[i] or 0) * f.period[i]
      local ms = math.max(1, math.ceil(tat - f.tau[i] - f.now))
      if not wait or ms < wait then wait = ms end
    end
  end
  if #writes > 0 then redis.call('HSET', f.state, unpack(writes)) end
  return wait
end

-- flow_tally(gone, entry): count a held entry that leaves its processing list, by its queue.
local function flow_tally(gone, entry)
  local nl = string.find(entry, '\n', 1, true)
  if nl then
    local q = string.sub(entry, 1, nl - 1)
    gone[q] = (gone[q] or 0) + 1
  end
end

-- flow_release(state, gone): lower the in-flight counts of the queues in `gone` (queue -> n),
-- never below zero; a queue without an in-flight limit has no count and is left alone. The
-- caller checked the type of `state` (flow_misfit) before its first write.
local function flow_release(state, gone)
  for q, n in pairs(gone) do
    local field = 'held:' .. q
    local v = redis.call('HGET', state, field)
    if v then
      redis.call('HSET', state, field, math.max(0, (tonumber(v) or 0) - n))
    end
  end
end

-- flow_state_of(state) -> whether the state hash exists, and its WRONGTYPE error (or nil): the
-- check a script that gives back held entries makes before its first write.
local function flow_state_of(state)
  if redis.call('EXISTS', state) == 0 then return false, nil end
  return true, wrong_type(state, 'hash')
end

-- flow_gone(on, state, entry): `entry` left its processing list (`on`: flow_state_of's answer).
local function flow_gone(on, state, entry)
  if on then
    local gone = {}
    flow_tally(gone, entry)
    flow_release(state, gone)
  end
end
