-- lib/entry.lua (included by `-- include: entry`): the one Lua owner of the wire formats that
-- taskqueue.keys owns in Python: the entry "<queue key>\n<score>\n<element>" (score empty for
-- lists), the envelope '{"__taskqueue__":1,"attempts":N,...}' and the dead-letter record.
-- Every key a script writes is declared in KEYS: a queue named by an entry is written only when
-- it is one of the TaskQueue's queues passed in KEYS (Redis Cluster requires it).

local MARK = '{"__taskqueue__":1,"attempts":'

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

-- key_set(first): the set of KEYS[first..] (the declared queue keys).
local function key_set(first)
  local set = {}
  for i = first, #KEYS do set[KEYS[i]] = true end
  return set
end

-- now_seconds(): the server's clock (unix seconds, 3 decimals).
local function now_seconds()
  local t = redis.call('TIME')
  return tonumber(t[1]) + math.floor(tonumber(t[2]) / 1000) / 1000
end

-- bump(element) -> attempts, envelope: the element with its attempt count raised by one (a raw
-- payload is wrapped in an envelope with "enqueued_at":0, i.e. unknown, to carry the count).
local function bump(element)
  if string.sub(element, 1, #MARK) == MARK then
    local n, rest = string.match(element, '^(%d+)(.*)$', #MARK + 1)
    if n then
      local attempts = tonumber(n) + 1
      return attempts, MARK .. attempts .. rest
    end
  end
  return 1, MARK .. '1,"enqueued_at":0,"id":"","payload":' .. cjson.encode(element) .. '}'
end

local DEAD_FIELDS = {queue = true, payload = true, attempts = true, error = true,
  failed_at = true, id = true}

-- is_dead_record(text): true when `text` is a dead-letter record: a JSON object with exactly
-- the fields of DEAD_FIELDS and a string payload (taskqueue.keys.is_dead_letter_record).
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

-- dead_record(queue, element, attempts, error): the JSON dead-letter record (same fields as
-- taskqueue.keys.dead_letter_record writes); payload and id are read from an envelope. A
-- payload that is itself a dead-letter record is the record, byte-exact (never nested).
local function dead_record(queue, element, attempts, err)
  local payload, id = element, ''
  if string.sub(element, 1, #MARK) == MARK then
    local ok, decoded = pcall(cjson.decode, element)
    if ok and type(decoded) == 'table' then
      payload = decoded['payload']
      id = decoded['id'] or ''
    end
  end
  if is_dead_record(payload) then return payload end
  return cjson.encode({queue = queue, payload = payload, attempts = attempts, error = err,
    failed_at = now_seconds(), id = id})
end

-- put_back(entry, queues, dead_key): the element back to the right end of its list (served next)
-- or into its zset with its score. `queues` is the set of declared queue keys: an entry whose
-- queue is not one of them (the queue left the TaskQueue's spec) goes to the dead-letter list
-- `dead_key` instead, where `taskqueue dlq` shows it. Returns 'queued', 'dead', or false when
-- `entry` is not in the entry format (nothing is written then).
local function put_back(entry, queues, dead_key)
  local queue, score, element = split_entry(entry)
  if not queue then return false end
  if not queues[queue] then
    local attempts = 0
    if string.sub(element, 1, #MARK) == MARK then
      attempts = tonumber(string.match(element, '^(%d+)', #MARK + 1)) or 0
    end
    redis.call('LPUSH', dead_key, dead_record(queue, element, attempts,
      'queue ' .. queue .. ' is not in this TaskQueue any more'))
    return 'dead'
  end
  if score ~= '' then
    redis.call('ZADD', queue, score, element)
  else
    redis.call('RPUSH', queue, element)
  end
  return 'queued'
end
