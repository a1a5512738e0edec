-- lib/lifecycle.lua (included by `-- include: lifecycle`, after lib/entry.lua, lib/count.lua and
-- lib/index.lua):
-- cancelled tasks and the task index (taskqueue.wire.lifecycle owns both in Python).
-- A task is known by its envelope id; a raw payload (no envelope, or an envelope without an id)
-- has none and is neither tracked nor cancellable.
-- The cancels zset holds task id -> the time (unix ms) its cancel expires; a fetch checks it only
-- when it is not empty (one ZCARD per call, then one ZSCORE per task taken).
-- The task index `<prefix>:task:<id>` (a hash: state, queue, at, processing, attempt, due,
-- error, and for a dead task its dead-letter record) is written only when the caller passes its key prefix (spec.worker.tracking): by
-- fetch.lua, fail.lua and cancelled.lua, and by recover.lua and release.lua when they put a task back or
-- dead-letter it. Its keys are built here from the id, so they are not in KEYS: they share the
-- TaskQueue's {hash tag}, hence its Redis Cluster slot. Each write sets its expiry to
-- TRACK_TTL_MS (lib/index.lua).

local CANCELLED = 'cancelled' -- taskqueue.wire.lifecycle.CANCELLED_FIELD

-- task_id(element): the envelope id of `element` (nil for a raw payload or an envelope without
-- a non-empty id). The id is read where the client writes it, before "payload"; an envelope with
-- its fields in another order, or an id with escapes, is decoded.
local function task_id(element)
  if string.sub(element, 1, #MARK) ~= MARK then return nil end
  local id = string.match(element, ',"id":"([^"\\]+)","payload":', #MARK + 1)
  if id or not string.find(element, '"id"', #MARK + 1, true) then return id end
  local ok, env = pcall(cjson.decode, element)
  if ok and type(env) == 'table' and type(env['id']) == 'string' and env['id'] ~= '' then
    return env['id']
  end
  return nil
end

-- now_ms(): the server's clock, unix ms.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- track(task_prefix, id, fields): `index_write` of the flat `fields` on the task's index hash;
-- nothing when tracking is off (task_prefix nil or '') or the task has no id.
local function track(task_prefix, id, fields)
  if not task_prefix or task_prefix == '' or not id then return end
  index_write(task_prefix .. id, fields)
end

-- track_dead(task_prefix, id, record): the index of task `id`, dead-lettered with `record` (the
-- JSON dead-letter record pushed): its error, and the record itself (`taskqueue status` shows
-- its queue, attempts, failure time and payload; the index expires as every index does).
local function track_dead(task_prefix, id, record)
  if not task_prefix or task_prefix == '' or not id then return end
  local ok, decoded = pcall(cjson.decode, record)
  local err = ok and type(decoded) == 'table' and decoded['error']
  track(task_prefix, id, {'state', 'dead', 'at', now_ms(),
    'error', type(err) == 'string' and err or '', 'record', record})
end

-- track_moved(task_prefix, element, state, queue, record): the index of the task `element`
-- carries, put back by a recovery or a give-back ('queued' in `queue`) or dead-lettered ('dead',
-- with `record`, its dead-letter record: `track_dead`).
local function track_moved(task_prefix, element, state, queue, record)
  if not task_prefix or task_prefix == '' then return end
  local id = task_id(element)
  if state == 'queued' then
    track(task_prefix, id, {'state', state, 'queue', queue, 'at', now_ms()})
  else
    track_dead(task_prefix, id, record)
  end
end

-- track_entries(task_prefix, entries, state, processing): `state` for every entry of `entries`
-- ("<queue>\n<score>\n<element>") that carries an id; the attempt this is (attempts + 1) when
-- the state is 'running'.
local function track_entries(task_prefix, entries, state, processing)
  if not task_prefix or task_prefix == '' or #entries == 0 then return end
  local at = now_ms()
  for _, e in ipairs(entries) do
    local queue, _, element = split_entry(e)
    local id = element and task_id(element)
    if id then
      if state == 'running' then
        local attempts = tonumber(string.match(element, '^(%d+),', #MARK + 1)) or 0
        track(task_prefix, id, {'state', state, 'queue', queue, 'at', at,
          'processing', processing, 'attempt', attempts + 1})
      else
        track(task_prefix, id, {'state', state, 'at', at})
      end
    end
  end
end

-- drop_cancelled(cancels, stats, entries, task_prefix) -> kept, dropped: `entries` split by
-- whether their id is in the cancels zset; each dropped one leaves the zset, is counted (stats
-- CANCELLED) and tracked as cancelled. Never run, never retried: the caller pushes only the kept
-- entries.
local function drop_cancelled(cancels, stats, entries, task_prefix)
  if #entries == 0 or redis.call('ZCARD', cancels) == 0 then return entries, {} end
  local kept, dropped = {}, {}
  for _, e in ipairs(entries) do
    local _, _, element = split_entry(e)
    local id = element and task_id(element)
    if id and redis.call('ZSCORE', cancels, id) then
      redis.call('ZREM', cancels, id)
      add_count(stats, CANCELLED, 1)
      track(task_prefix, id, {'state', 'cancelled', 'at', now_ms()})
      dropped[#dropped + 1] = e
    else
      kept[#kept + 1] = e
    end
  end
  return kept, dropped
end
