-- recover.lua: requeue every task held by one (dead or departed) worker, atomically.
-- KEYS[1] the worker's processing list, KEYS[2] workers zset, KEYS[3] dead-letter list,
-- KEYS[4] stats hash, KEYS[5] flow state hash (lib/flow.lua: the in-flight counts), KEYS[6..5+N]
-- the TaskQueue's queues (every queue an entry may name).
-- ARGV[1] worker id, ARGV[2] maxAttempts, ARGV[3] reason, ARGV[4] dead-letter list's maximum
-- length, ARGV[5] the task index's key prefix ("": tracking off; with it, each task's index says
-- where it went: queued or dead), ARGV[6..5+N] the type of each queue ("list" | "zset"). Times
-- come from Redis's clock (TIME).
-- Each entry goes back to the right end of its list (it is the oldest work) or into its zset with
-- its score, with its attempt count raised by one (lib/entry.lua `bump`). A task whose attempts
-- reach maxAttempts is a poison pill and goes to the dead-letter list instead, and so does an
-- entry that cannot go back (not an entry, a queue the TaskQueue no longer has, a score its
-- queue's type does not take, a queue key holding another type: `place`) or whose envelope is
-- malformed (kept byte for byte), each with the reason.
-- Returns {requeued, dead_lettered}. Two callers recovering the same worker cannot both move a
-- task: the script runs atomically and the first one empties the list.
-- include: entry
-- include: count
-- include: moves
-- include: flow
-- include: index
-- include: lifecycle
local flow_on, wrong = flow_state_of(KEYS[5])
wrong = wrong or misfit({KEYS[1], 'list', KEYS[2], 'zset', KEYS[3], 'list', KEYS[4], 'hash'})
if wrong then return wrong end
local max_attempts, max_dead = tonumber(ARGV[2]), tonumber(ARGV[4])
local task_prefix = ARGV[5]
local queues = queue_types(6, 6, 1)
local lost = 'worker lost: ' .. ARGV[3]
local seen, gone = {}, {}
local requeued, dead = 0, 0
while true do
  local entry = redis.call('RPOP', KEYS[1])
  if not entry then break end
  if flow_on then flow_tally(gone, entry) end
  local reason, queue, score, element = place(entry, queues, seen)
  local attempts, bumped
  if not reason then
    attempts, bumped = bump(element)
    if not attempts then reason = 'malformed envelope: ' .. bumped end
  end
  if reason then
    local record = reject(KEYS[3], KEYS[4], max_dead, queue, element, lost .. '; ' .. reason)
    track_moved(task_prefix, element, 'dead', queue, record)
    dead = dead + 1
  elseif attempts >= max_attempts then
    local record = reject(KEYS[3], KEYS[4], max_dead, queue, bumped, lost)
    track_moved(task_prefix, bumped, 'dead', queue, record)
    dead = dead + 1
  else
    put(queue, score, bumped)
    track_moved(task_prefix, bumped, 'queued', queue)
    requeued = requeued + 1
  end
end
redis.call('ZREM', KEYS[2], ARGV[1])
if flow_on then flow_release(KEYS[5], gone) end
if requeued > 0 then add_count(KEYS[4], 'recovered', requeued) end
return {requeued, dead}
