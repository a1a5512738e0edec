-- release.lua: give back entries a worker holds but will not run (SIGTERM drain, fetch replies
-- lost on a broken connection): out of the processing list and back to the right end of their
-- list (served next) or into their zset, attempts unchanged (the handler never finished them).
local processing = KEYS[1]   -- the caller's processing list
local dead_letter = KEYS[2]  -- dead-letter list
local stats = KEYS[3]        -- stats hash
local flow_state = KEYS[4]   -- flow state hash (lib/flow.lua: the in-flight counts)
local FIRST_QUEUE = 5        -- KEYS[5..4+N]: the TaskQueue's N queues
local max_dead = tonumber(ARGV[1])  -- the dead-letter list's maximum length
local task_prefix = ARGV[2]  -- the task index's key prefix ("": tracking off; with it, each
                             -- task given back is indexed as queued, or dead)
local FIRST_TYPE = 3         -- ARGV[3..2+N]: the type of each queue ("list" | "zset"), KEYS order
local first_entry = FIRST_TYPE + #KEYS - FIRST_QUEUE + 1  -- ARGV[first_entry..]: the entries
-- Returns how many were given back. Entries no longer held are skipped; a held entry that cannot
-- go back (not an entry, a queue the TaskQueue no longer has, a score its queue's type does not
-- take, a queue key holding another type: lib/entry.lua `place`) goes to the dead-letter list.
-- include: entry
-- include: count
-- include: moves
-- include: flow
-- include: index
-- include: lifecycle
local flow_on, wrong = flow_state_of(flow_state)
wrong = wrong or misfit({processing, 'list', dead_letter, 'list', stats, 'hash'})
if wrong then return wrong end
local queues = queue_types(FIRST_QUEUE, FIRST_TYPE, 1)
local seen, gone = {}, {}
local n = 0
for i = first_entry, #ARGV do
  local entry = ARGV[i]
  local reason, queue, score, element = place(entry, queues, seen)
  if redis.call('LREM', processing, -1, entry) > 0 then
    if flow_on then flow_tally(gone, entry) end
    if reason then
      local record = reject(dead_letter, stats, max_dead, queue, element, reason)
      track_moved(task_prefix, element, 'dead', queue, record)
    else
      put(queue, score, element)
      track_moved(task_prefix, element, 'queued', queue)
      n = n + 1
    end
  end
end
if flow_on then flow_release(flow_state, gone) end
return n
