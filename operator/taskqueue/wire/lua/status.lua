-- status.lua: what Redis knows of one task, in one call (`taskqueue status`, client.status).
-- KEYS[1] the task's index hash, KEYS[2] cancels zset, KEYS[3] its idempotency done marker,
-- KEYS[4] its idempotency running lease, KEYS[5] workers zset.
-- ARGV[1] task id, ARGV[2] processing-list key prefix, ARGV[3] progress-hash key prefix.
-- Returns {index (flat HGETALL), cancel expiry ms or "", done marker 1/0, running lease (its
-- owner "<worker id>#<slot>") or "", the running worker's heartbeat deadline ms or "", its
-- progress report or "", Redis's now ms}. The progress hash and the worker are found from the index or the lease, so
-- their keys are not in KEYS (they share the TaskQueue's {hash tag}). Reads only.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local index = redis.call('HGETALL', KEYS[1])
local fields = {}
for i = 1, #index, 2 do fields[index[i]] = index[i + 1] end
local lease = redis.call('GET', KEYS[4]) or ''
local worker = string.match(lease, '^(.+)#%d+$') or lease -- the owner is "<worker id>#<slot>"
if fields['state'] == 'running' and fields['processing'] then
  worker = string.sub(fields['processing'], #ARGV[2] + 1)
end
local deadline, progress = '', ''
if worker ~= '' then
  deadline = redis.call('ZSCORE', KEYS[5], worker) or ''
  progress = redis.call('HGET', ARGV[3] .. worker, ARGV[1]) or ''
end
local cancel = redis.call('ZSCORE', KEYS[2], ARGV[1]) or ''
local done = redis.call('EXISTS', KEYS[3])
return {index, cancel, done, lease, deadline, progress, now_ms()}
