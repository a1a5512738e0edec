-- lib/entry.lua (included by `-- include: entry`): the one Lua owner of the wire formats that
-- taskqueue.wire.keys owns in Python: the entry "<queue key>\n<score>\n<element>" (score empty for
-- lists) and the envelope '{"__taskqueue__":1,"attempts":N,...}' (the dead-letter record:
-- lib/moves.lua).
-- Every key a script writes is declared in KEYS: a queue named by an entry is written only when
-- it is one of the TaskQueue's queues passed in KEYS (Redis Cluster requires it).
-- Producers in any language write entries and envelopes, so a script checks all it reads
-- before its first write: the type each key holds (`misfit`), an entry's queue, score and the
-- queue key's type (`place`), an envelope's fields (`read_envelope`). Redis does not roll back a
-- script that fails half-way, so nothing may fail after a write: what cannot be used goes to the
-- dead-letter list with the reason (lib/moves.lua); a counter's value is never checked, as no
-- script fails on one (lib/count.lua). Reads only: the one command here is TYPE
-- (taskqueue.redisio.acl derives each component's ACL rule from the commands its scripts name).

local MARK = '{"__taskqueue__":1,"attempts":'
local DEAD_TRIMMED = 'dead_trimmed' -- taskqueue.wire.keys.DEAD_TRIMMED_FIELD
local NOT_AN_ENTRY = 'entry is not "<queue>\\n<score>\\n<payload>"'

-- split_entry(entry) -> queue, score, element; nil when `entry` is not in the entry format.
local function split_entry(entry)
  local nl1 = string.find(entry, '\n', 1, true)
  local nl2 = nl1 and string.find(entry, '\n', nl1 + 1, true)
  if not nl2 then return nil end
  return string.sub(entry, 1, nl1 - 1), string.sub(entry, nl1 + 1, nl2 - 1),
    string.sub(entry, nl2 + 1)
end

-- join_entry(queue, score, element): the entry of an element taken from `queue`.
local function join_entry(queue, score, element)
  return queue .. '\n' .. score .. '\n' .. element
end

-- queue_types(first_key, first_arg, stride): {queue key = "list" | "zset"} for the queues in
-- KEYS[first_key..], the type of the n-th one in ARGV[first_arg + (n - 1) * stride].
local function queue_types(first_key, first_arg, stride)
  local types = {}
  for i = first_key, #KEYS do types[KEYS[i]] = ARGV[first_arg + (i - first_key) * stride] end
  return types
end

-- type_of(key): the type `key` holds ("none" when absent).
local function type_of(key)
  return redis.call('TYPE', key)['ok']
end

-- wrong_type(key, kind): nil when `key` holds a `kind` or nothing, else the WRONGTYPE error
-- reply naming it (the script returns it before any write).
local function wrong_type(key, kind)
  local held = type_of(key)
  if held == 'none' or held == kind then return nil end
  return redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. held .. ', not a ' .. kind)
end

-- misfit(expected): `wrong_type` of each pair of the flat list key, type, key, type...; the
-- first error, or nil.
local function misfit(expected)
  for i = 1, #expected, 2 do
    local wrong = wrong_type(expected[i], expected[i + 1])
    if wrong then return wrong end
  end
  return nil
end

-- is_score(s): a score ZADD takes, written as Redis writes scores: a decimal number ("7",
-- "-2.5", "1e+20", ".5") or inf, +inf, -inf. Refused: nan, spaces, hex, a number that
-- overflows or underflows to zero (ZADD refuses those too), anything else.
local function is_score(s)
  if s == 'inf' or s == '+inf' or s == '-inf' then return true end
  local body = string.match(s, '^[+-]?(.*)$')
  local mantissa = string.match(body, '^([%d%.]+)[eE][+-]?%d+$') or body
  if not (string.match(mantissa, '^%d+%.?%d*$') or string.match(mantissa, '^%.%d+$')) then
    return false
  end
  local n = tonumber(s)
  if not n or n == math.huge or n == -math.huge then return false end
  return n ~= 0 or not string.find(mantissa, '[1-9]')
end

-- read_envelope(element) -> envelope, attempts; or nil, problem: `element` (which starts with
-- MARK) decoded, with the rule it breaks otherwise. The rules, order and words of
-- taskqueue.wire.keys._read_envelope.
local function read_envelope(element)
  local digits = string.match(element, '^(%d+),', #MARK + 1)
  if not digits or #digits > 9 or (#digits > 1 and string.sub(digits, 1, 1) == '0') then
    return nil, 'attempts is not a count'
  end
  local ok, env = pcall(cjson.decode, element)
  if not ok or type(env) ~= 'table' then return nil, 'not valid JSON' end
  if env['attempts'] ~= tonumber(digits) then return nil, 'attempts is not a count' end
  if type(env['payload']) ~= 'string' then return nil, 'payload is not a string' end
  if env['id'] ~= nil and type(env['id']) ~= 'string' then return nil, 'id is not a string' end
  local t = env['enqueued_at']
  if type(t) ~= 'number' or t ~= t or t < 0 or t == math.huge then
    return nil, 'enqueued_at is not a time'
  end
  return env, tonumber(digits)
end

-- task_of(element) -> payload, id, attempts, problem: what a dead-letter record keeps of
-- `element`. A raw payload is its own payload (no id, 0 attempts); a malformed envelope is kept
-- whole, byte for byte, with the problem named.
local function task_of(element)
  if string.sub(element, 1, #MARK) ~= MARK then return element, '', 0, nil end
  local env, attempts = read_envelope(element)
  if not env then return element, '', 0, 'malformed envelope: ' .. attempts end
  return env['payload'], env['id'] or '', attempts, nil
end

local DEAD_FIELDS = {queue = true, payload = true, attempts = true, error = true,
  failed_at = true, id = true}

-- is_dead_record(text): true when `text` is a dead-letter record: a JSON object with exactly
-- the fields of DEAD_FIELDS and a string payload (taskqueue.wire.keys.is_dead_letter_record).
local function is_dead_record(text)
  if type(text) ~= 'string' or string.sub(text, 1, 1) ~= '{' then return false end
  local ok, decoded = pcall(cjson.decode, text)
  if not ok or type(decoded) ~= 'table' or type(decoded['payload']) ~= 'string' then
    return false
  end
  local n = 0
  for k in pairs(decoded) do
    if not DEAD_FIELDS[k] then return false end
    n = n + 1
  end
  return n == 6
end

-- bump(element) -> attempts, element: the element with its attempt count raised by one (a raw
-- payload is wrapped in an envelope with "enqueued_at":0, i.e. unknown, to carry the count);
-- nil, problem for a malformed envelope (which is left as it is).
local function bump(element)
  if string.sub(element, 1, #MARK) ~= MARK then
    return 1, MARK .. '1,"enqueued_at":0,"id":"","payload":' .. cjson.encode(element) .. '}'
  end
  local env, attempts = read_envelope(element)
  if not env then return nil, attempts end
  local rest = string.sub(element, #MARK + #tostring(attempts) + 1)
  return attempts + 1, MARK .. (attempts + 1) .. rest
end

-- place(entry, queues, seen) -> reason, queue, score, element: where `entry` goes back, with
-- reason nil when it can: its queue is declared (`queues`: key -> type), its score is what that
-- type takes (empty for a list, a number for a zset), and the queue key holds that type or
-- nothing, so no write can fail and no key is created with another type. Otherwise the reason
-- names what is wrong (queue "" and the whole entry as element when it is not an entry at all).
-- `seen` caches the types the keys hold. Reads only.
local function place(entry, queues, seen)
  local queue, score, element = split_entry(entry)
  if not queue then return NOT_AN_ENTRY, '', '', entry end
  local declared = queues[queue]
  if not declared then
    return 'queue ' .. queue .. ' is not in this TaskQueue', queue, score, element
  end
  if declared == 'list' and score ~= '' then
    return 'list queue ' .. queue .. ' takes no score (got "' .. score .. '")', queue, score,
      element
  end
  if declared == 'zset' and not is_score(score) then
    return 'zset queue ' .. queue .. ' needs a numeric score (got "' .. score .. '")', queue,
      score, element
  end
  seen[queue] = seen[queue] or type_of(queue)
  if seen[queue] ~= 'none' and seen[queue] ~= declared then
    return 'queue key ' .. queue .. ' holds a ' .. seen[queue] .. ', not a ' .. declared, queue,
      score, element
  end
  return nil, queue, score, element
end
