-- fire.lua: fire the due slots of a TaskQueue's schedules, each exactly once, atomically.
-- The operator calls it once per poll with every schedule's slots from the last slot accounted
-- to the end of its fire-ahead horizon; a second operator, a restart or a retried call fires
-- nothing twice:
--  * per schedule the hash keeps `through:<name>`, the time up to which every slot was fired,
--    skipped or counted as missed. A call names the value it read last (`seen`); when Redis
--    holds another one (another operator moved it, or the caller has not read it yet) the
--    schedule is left alone and the reply carries the value, for the caller's next call;
--  * each slot is fired by `SET <prefix>:fired:<task id> NX PX <ttl>`: a slot already fired
--    is not fired again even by a call whose `seen` is right;
--  * a fired slot's task is ZADDed to the delayed zset, due at the slot plus its jitter: the
--    workers' promoter moves it into its queue on time.
-- Overlap Skip: a slot is skipped while the previous fired task of the schedule is still
-- queued, delayed or in a worker's processing list, with any of its first `checks` attempt
-- counts (its elements differ only in the attempt count: the id and enqueue time are the
-- slot's). The processing lists are read by name from the workers zset (read only).
-- KEYS[1] the schedules hash, KEYS[2] the delayed zset, KEYS[3] the workers zset,
-- KEYS[4 .. 3 + nq] the queues, then one fired key per slot, in the order of the slots below.
-- ARGV[1] nq, ARGV[2 .. 1 + nq] the queues' types, then the number of schedules, then per
-- schedule: name, seen ("" unknown), init (through of a schedule Redis does not know yet),
-- through after this call, missed (slots older than the catch-up window since `seen`), skip
-- ("1": overlap Skip), checks, ttl ms, slot count, then per slot: slot ms, due ms, queue index
-- (1-based), element (the envelope, attempts 0), task id.
-- Returns per schedule {name, "ok" | "stale", through, last slot ms, last task id, missed,
-- skipped, one letter per slot: F fired, D already fired, S skipped} ("" where never written).
-- include: entry
local H = KEYS[1]        -- the schedules hash
local DELAYED = KEYS[2]  -- the delayed zset
local WORKERS = KEYS[3]  -- the workers zset
local nq = tonumber(ARGV[1])
local wrong = misfit({H, 'hash', DELAYED, 'zset', WORKERS, 'zset'})
if wrong then return wrong end
local types, queues = {}, {}
for i = 1, nq do
  types[i] = ARGV[1 + i]
  queues[#queues + 1] = KEYS[3 + i]
  queues[#queues + 1] = types[i]
end
wrong = misfit(queues)
if wrong then return wrong end

local function field(what, name) return what .. ':' .. name end

local function processing_lists()
  local lists = {}
  local prefix = string.sub(WORKERS, 1, #WORKERS - #'workers') .. 'processing:'
  for _, id in ipairs(redis.call('ZRANGE', WORKERS, 0, -1)) do lists[#lists + 1] = prefix .. id end
  return lists
end

-- The previous task (its attempts-0 element in queue number q) is still queued, delayed or held.
local function alive(element, q, checks)
  if not element or not q then return false end
  local qkey, qtype = KEYS[3 + tonumber(q)], types[tonumber(q)]
  if not qkey then return false end
  local rest = string.sub(element, #MARK + 2)
  local score = qtype == 'zset' and '0' or ''
  local lists = processing_lists()
  for k = 0, checks - 1 do
    local el = MARK .. k .. rest
    local entry = join_entry(qkey, score, el)
    if redis.call('ZSCORE', DELAYED, entry) then return true end
    if qtype == 'zset' then
      if redis.call('ZSCORE', qkey, el) then return true end
    elseif redis.call('LPOS', qkey, el) then return true end
    for _, list in ipairs(lists) do
      if redis.call('LPOS', list, entry) then return true end
    end
  end
  return false
end

local function fire_slot(name, skip, checks, ttl, slot, due, q, element, id, fired_key)
  if not redis.call('SET', fired_key, id, 'NX', 'PX', ttl) then return 'D' end
  if skip and alive(redis.call('HGET', H, field('element', name)),
                    redis.call('HGET', H, field('queue', name)), checks) then
    redis.call('HINCRBY', H, field('skipped', name), 1)
    return 'S'
  end
  local score = types[tonumber(q)] == 'zset' and '0' or ''
  redis.call('ZADD', DELAYED, due, join_entry(KEYS[3 + tonumber(q)], score, element))
  redis.call('HSET', H, field('slot', name), slot, field('id', name), id,
             field('element', name), element, field('queue', name), q)
  return 'F'
end

local replies = {}
local a = 2 + nq
local nschedules = tonumber(ARGV[a])
a = a + 1
local k = 3 + nq
for _ = 1, nschedules do
  local name, seen, init, through_new = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local missed, skip, checks = tonumber(ARGV[a + 4]), ARGV[a + 5] == '1', tonumber(ARGV[a + 6])
  local ttl, nslots = ARGV[a + 7], tonumber(ARGV[a + 8])
  a = a + 9
  local through = redis.call('HGET', H, field('through', name))
  local fresh = not through and seen == ''
  local state, letters = 'stale', ''
  if fresh or through == seen then
    state = 'ok'
    if fresh then redis.call('HSET', H, field('through', name), init) end
    if missed > 0 and not fresh then redis.call('HINCRBY', H, field('missed', name), missed) end
    for s = 0, nslots - 1 do
      local i = a + s * 5
      letters = letters .. fire_slot(name, skip, checks, ttl, ARGV[i], ARGV[i + 1], ARGV[i + 2],
                                     ARGV[i + 3], ARGV[i + 4], KEYS[k + 1 + s])
    end
    redis.call('HSET', H, field('through', name), through_new)
    through = through_new
  end
  a = a + nslots * 5
  k = k + nslots
  local got = redis.call('HMGET', H, field('slot', name), field('id', name),
                         field('missed', name), field('skipped', name))
  replies[#replies + 1] = {name, state, through or '', got[1] or '', got[2] or '', got[3] or '',
                           got[4] or '', letters}
end
return replies
