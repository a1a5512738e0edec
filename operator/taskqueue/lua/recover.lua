-- recover.lua: requeue every task held by one (dead or departed) worker, atomically.
-- KEYS[1] the worker's processing list, KEYS[2] workers zset, KEYS[3] dead-letter list,
-- KEYS[4] stats hash.
-- ARGV[1] worker id, ARGV[2] maxAttempts, ARGV[3] reason. Times come from Redis's clock (TIME).
-- Each entry is "<queue key>\n<score>\n<element>". The element goes back to the right end of its
-- list (it is the oldest work) or into its zset with its score, with its attempt count raised by
-- one (a raw payload is wrapped in an envelope to carry the count). A task whose attempts reach
-- maxAttempts is a poison pill and goes to the dead-letter list instead.
-- Returns {requeued, dead_lettered}. Two callers recovering the same worker cannot both move a
-- task: the script runs atomically and the first one empties the list.
local MARK = '{"__taskqueue__":1,"attempts":'
local max_attempts = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local requeued, dead = 0, 0
while true do
  local entry = redis.call('RPOP', KEYS[1])
  if not entry then break end
  local nl1 = string.find(entry, '\n', 1, true)
  local nl2 = nl1 and string.find(entry, '\n', nl1 + 1, true)
  if not nl2 then
    -- not an entry this project wrote: keep it visible rather than drop it
    redis.call('LPUSH', KEYS[3], cjson.encode({queue = '', payload = entry, attempts = 0,
      error = 'unreadable processing entry', failed_at = now, id = ''}))
    dead = dead + 1
  else
    local queue = string.sub(entry, 1, nl1 - 1)
    local score = string.sub(entry, nl1 + 1, nl2 - 1)
    local element = string.sub(entry, nl2 + 1)
    local attempts, env
    if string.sub(element, 1, #MARK) == MARK then
      local n, rest = string.match(element, '^(%d+)(.*)$', #MARK + 1)
      attempts = tonumber(n) + 1
      env = MARK .. attempts .. rest
    else
      attempts = 1
      env = MARK .. '1,"enqueued_at":0,"id":"","payload":' .. cjson.encode(element) .. '}'
    end
    if attempts >= max_attempts then
      local ok, decoded = pcall(cjson.decode, env)
      local payload, id = element, ''
      if ok then payload = decoded['payload']; id = decoded['id'] end
      redis.call('LPUSH', KEYS[3], cjson.encode({queue = queue, payload = payload,
        attempts = attempts, error = 'worker lost: ' .. ARGV[3], failed_at = now,
        id = id}))
      redis.call('HINCRBY', KEYS[4], 'dead', 1)
      dead = dead + 1
    elseif score ~= '' then
      redis.call('ZADD', queue, score, env)
      requeued = requeued + 1
    else
      redis.call('RPUSH', queue, env)
      requeued = requeued + 1
    end
  end
end
redis.call('ZREM', KEYS[2], ARGV[1])
if requeued > 0 then redis.call('HINCRBY', KEYS[4], 'recovered', requeued) end
return {requeued, dead}
