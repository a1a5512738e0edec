-- release.lua: give back entries a worker holds but will not run (SIGTERM drain, fetch replies
-- lost on a broken connection): out of the processing list and back to the right end of their
-- list (served next) or into their zset, attempts unchanged (the handler never finished them).
-- KEYS[1] processing list. ARGV[1..] the entries.
-- Returns how many were given back (entries no longer held are skipped).
-- include: entry
local n = 0
for i = 1, #ARGV do
  local entry = ARGV[i]
  if redis.call('LREM', KEYS[1], -1, entry) > 0 and put_back(entry) then
    n = n + 1
  end
end
return n
