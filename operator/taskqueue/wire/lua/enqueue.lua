-- enqueue.lua: a producer's push with options, atomically: unique (the id's unique key is SET NX
-- with the window as expiry; when it already exists nothing is pushed) and/or scheduled (the
-- entry is ZADDed to the delayed zset, scored by its due time, and promoted by the workers).
-- KEYS[1] where to push: the queue (list or zset) or, for a scheduled task, the delayed zset;
-- KEYS[2] the unique key of the task id (read only when ARGV[4] > 0), KEYS[3] (optional) the
-- task's index hash (spec.worker.tracking, `enqueue(..., track=True)`).
-- ARGV[1] "lpush" | "zadd", ARGV[2] score (zadd: the priority, or the due time in unix ms),
-- ARGV[3] the element (a scheduled task: its delayed entry), ARGV[4] unique window in ms
-- ("0": not unique), ARGV[5] the task id (value of the unique key), ARGV[6] the queue key (with
-- KEYS[3]).
-- Returns 1 when pushed, 0 when the id was already enqueued within the window (a no-op).
-- Checked before any write (so a refused push leaves no unique key behind): KEYS[1] holds the
-- type the push needs or nothing (else WRONGTYPE naming it), a zadd score is a number. The
-- index is written only when the task was pushed (a unique no-op leaves the task's index as its
-- run left it), in the same atomic call, so a worker's later writes always follow it: queued in
-- ARGV[6], or delayed until ARGV[2] when KEYS[1] is not the queue.
-- include: entry
-- include: index
local zadd = ARGV[1] == 'zadd'
local wrong = misfit({KEYS[1], zadd and 'zset' or 'list'})
if wrong then return wrong end
if zadd and not is_score(ARGV[2]) then
  return redis.error_reply('ERR score "' .. ARGV[2] .. '" is not a number')
end
if tonumber(ARGV[4]) > 0 then
  if not redis.call('SET', KEYS[2], ARGV[5], 'NX', 'PX', ARGV[4]) then return 0 end
end
if zadd then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
else
  redis.call('LPUSH', KEYS[1], ARGV[3])
end
if KEYS[3] then
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if KEYS[1] == ARGV[6] then
    index_write(KEYS[3], {'state', 'queued', 'queue', ARGV[6], 'at', at})
  else
    index_write(KEYS[3], {'state', 'delayed', 'queue', ARGV[6], 'at', at, 'due', ARGV[2]})
  end
end
return 1
