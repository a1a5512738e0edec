-- release.lua: give back entries a worker holds but will not run (SIGTERM drain, fetch replies
-- lost on a broken connection): out of the processing list and back to the right end of their
-- list (served next) or into their zset, attempts unchanged (the handler never finished them).
-- KEYS[1] processing list, KEYS[2] dead-letter list, KEYS[3] stats hash, KEYS[4] flow state hash
-- (lib/flow.lua: the in-flight counts), KEYS[5..4+N] the TaskQueue's queues.
-- ARGV[1] dead-letter list's maximum length, ARGV[2..1+N] the type of each queue ("list" |
-- "zset"), ARGV[2+N..] the entries.
-- Returns how many were given back. Entries no longer held are skipped; a held entry that cannot
-- go back (not an entry, a queue the TaskQueue no longer has, a score its queue's type does not
-- take, a queue key holding another type: lib/entry.lua `place`) goes to the dead-letter list.
-- include: entry
-- include: count
-- include: moves
-- include: flow
local flow_on, wrong = flow_state(KEYS[4])
wrong = wrong or misfit({KEYS[1], 'list', KEYS[2], 'list', KEYS[3], 'hash'})
if wrong then return wrong end
local queues = queue_types(5, 2, 1)
local max_dead = tonumber(ARGV[1])
local seen, gone = {}, {}
local n = 0
for i = #KEYS - 2, #ARGV do
  local reason, queue, score, element = place(ARGV[i], queues, seen)
  if redis.call('LREM', KEYS[1], -1, ARGV[i]) > 0 then
    if flow_on then flow_tally(gone, ARGV[i]) end
    if reason then
      reject(KEYS[2], KEYS[3], max_dead, queue, element, reason)
    else
      put(queue, score, element)
      n = n + 1
    end
  end
end
if flow_on then flow_release(KEYS[4], gone) end
return n
