-- recover.lua: requeue every task held by one (dead or departed) worker, atomically.
-- KEYS[1] the worker's processing list, KEYS[2] workers zset, KEYS[3] dead-letter list,
-- KEYS[4] stats hash, KEYS[5..] the TaskQueue's queues (every queue an entry may name).
-- ARGV[1] worker id, ARGV[2] maxAttempts, ARGV[3] reason. Times come from Redis's clock (TIME).
-- Each entry goes back to the right end of its list (it is the oldest work) or into its zset with
-- its score, with its attempt count raised by one (lib/entry.lua `bump`). A task whose attempts
-- reach maxAttempts is a poison pill and goes to the dead-letter list instead, and so does an
-- entry naming a queue the TaskQueue no longer has, or one that is not an entry at all.
-- Returns {requeued, dead_lettered}. Two callers recovering the same worker cannot both move a
-- task: the script runs atomically and the first one empties the list.
-- include: entry
local max_attempts = tonumber(ARGV[2])
local queues = key_set(5)
local requeued, dead = 0, 0
while true do
  local entry = redis.call('RPOP', KEYS[1])
  if not entry then break end
  local queue, score, element = split_entry(entry)
  if not queue then
    -- not an entry this project wrote: keep it visible rather than drop it
    redis.call('LPUSH', KEYS[3], dead_record('', entry, 0, 'unreadable processing entry'))
    dead = dead + 1
  else
    local attempts, env = bump(element)
    if attempts >= max_attempts or not queues[queue] then
      local why = 'worker lost: ' .. ARGV[3]
      if not queues[queue] then why = why .. '; queue ' .. queue .. ' is not in this TaskQueue' end
      redis.call('LPUSH', KEYS[3], dead_record(queue, env, attempts, why))
      redis.call('HINCRBY', KEYS[4], 'dead', 1)
      dead = dead + 1
    else
      put_back(join_entry(queue, score, env), queues, KEYS[3])
      requeued = requeued + 1
    end
  end
end
redis.call('ZREM', KEYS[2], ARGV[1])
if requeued > 0 then redis.call('HINCRBY', KEYS[4], 'recovered', requeued) end
return {requeued, dead}
