-- release.lua: give back entries a worker holds but will not run (SIGTERM drain, fetch replies
-- lost on a broken connection): out of the processing list and back to the right end of their
-- list (served next) or into their zset, attempts unchanged (the handler never finished them).
-- KEYS[1] processing list, KEYS[2] dead-letter list, KEYS[3..] the TaskQueue's queues.
-- ARGV[1..] the entries.
-- Returns how many were given back (entries no longer held are skipped; an entry naming a queue
-- the TaskQueue no longer has goes to the dead-letter list, see lib/entry.lua `put_back`).
-- include: entry
local queues = key_set(3)
local n = 0
for i = 1, #ARGV do
  local entry = ARGV[i]
  if split_entry(entry) and redis.call('LREM', KEYS[1], -1, entry) > 0
      and put_back(entry, queues, KEYS[2]) == 'queued' then
    n = n + 1
  end
end
return n
