-- fail.lua: a failed attempt, atomically: take the entry out of the processing list, then either
-- schedule the retry in the delayed zset or push the dead-letter record, and count it.
local processing = KEYS[1]   -- the caller's processing list
local delayed = KEYS[2]      -- delayed zset
local dead_letter = KEYS[3]  -- dead-letter list
local stats = KEYS[4]        -- stats hash
local flow_state = KEYS[5]   -- flow state hash (lib/flow.lua: the in-flight counts)
local held = ARGV[1] == '1'  -- "1": the entry must still be in `processing`, else nothing happens
                             -- (a recovery already requeued it); "0": AtMostOnce, not held
local entry = ARGV[2]        -- the processing entry
local retry = ARGV[3] == 'retry'  -- "retry" | "dead"
local value = ARGV[4]        -- the new delayed entry (retry) or the dead-letter record (dead)
local due_ms = ARGV[5]       -- due time of the retry (unix ms)
local max_dead = tonumber(ARGV[6])  -- the dead-letter list's maximum length
local task_prefix = ARGV[7]  -- the task index's key prefix ("" or absent: tracking off)
-- Returns 1 when applied, 0 when the entry was no longer held. A key holding another type fails
-- the call before any write (WRONGTYPE naming it): the entry stays held.
-- include: entry
-- include: count
-- include: moves
-- include: flow
-- include: index
-- include: lifecycle
local wrong = misfit({processing, 'list', retry and delayed or dead_letter,
  retry and 'zset' or 'list', stats, 'hash'})
if wrong then return wrong end
local flow_on, flow_wrong = flow_state_of(flow_state)
if held and flow_wrong then return flow_wrong end
if held then
  if redis.call('LREM', processing, -1, entry) == 0 then return 0 end
  flow_gone(flow_on, flow_state, entry)
end
add_count(stats, 'failed', 1)
local _, _, element = split_entry(entry)
local id = element and task_id(element)
if retry then
  redis.call('ZADD', delayed, due_ms, value)
  add_count(stats, 'retried', 1)
  track(task_prefix, id, {'state', 'delayed', 'at', now_ms(), 'due', due_ms})
else
  push_dead(dead_letter, stats, max_dead, value)
  track_dead(task_prefix, id, value)
end
return 1
