-- lib/moves.lua (included by `-- include: moves`, after lib/entry.lua and lib/count.lua): the
-- writes the scripts that move entries share: an entry back to its queue (`put`), and the
-- dead-letter list, which only `push_dead` pushes to: LPUSH, then LTRIM to
-- spec.retry.deadLetterMaxLength, counting the dropped records. Every write here follows the
-- checks of lib/entry.lua (`misfit`, `place`), and counters cannot fail (lib/count.lua), so none
-- can fail half-way through a script.

-- now_seconds(): the server's clock (unix seconds, 3 decimals).
local function now_seconds()
  local t = redis.call('TIME')
  return tonumber(t[1]) + math.floor(tonumber(t[2]) / 1000) / 1000
end

-- dead_record(queue, payload, id, attempts, error): the JSON dead-letter record (same fields as
-- taskqueue.wire.keys.dead_letter_record writes). A payload that is itself a dead-letter record is
-- the record, byte-exact: a record is never nested inside another.
local function dead_record(queue, payload, id, attempts, err)
  if is_dead_record(payload) then return payload end
  return cjson.encode({queue = queue, payload = payload, attempts = attempts, error = err,
    failed_at = now_seconds(), id = id})
end

-- push_dead(dead, stats, max_length, record): the one place a dead-letter record is pushed:
-- LPUSH (newest first), count it ("dead"), then trim the list to its newest `max_length`
-- records (spec.retry.deadLetterMaxLength) and count the dropped ones (DEAD_TRIMMED). The
-- caller has checked that `dead` holds a list and `stats` a hash.
local function push_dead(dead, stats, max_length, record)
  local n = redis.call('LPUSH', dead, record)
  add_count(stats, 'dead', 1)
  if n > max_length then
    redis.call('LTRIM', dead, 0, max_length - 1)
    add_count(stats, DEAD_TRIMMED, n - max_length)
  end
end

-- reject(dead, stats, max_length, queue, element, reason) -> record: `element` of `queue` (or a
-- whole unreadable entry, queue "") to the dead-letter list, its payload byte for byte, with
-- `reason`; returns the record pushed.
local function reject(dead, stats, max_length, queue, element, reason)
  local payload, id, attempts, problem = task_of(element)
  if problem then reason = reason .. '; ' .. problem end
  local record = dead_record(queue, payload, id, attempts, reason)
  push_dead(dead, stats, max_length, record)
  return record
end

-- put(queue, score, element): an element `place` accepted, back to the right end of its list
-- (served next) or into its zset with its score.
local function put(queue, score, element)
  if score == '' then
    redis.call('RPUSH', queue, element)
  else
    redis.call('ZADD', queue, score, element)
  end
end
