-- release.lua: give back entries a worker holds but will not run (SIGTERM drain, fetch replies
-- lost on a broken connection): out of the processing list and back to the right end of their
-- list (served next) or into their zset, attempts unchanged (the handler never finished them).
-- KEYS[1] processing list. ARGV[1..] the entries.
-- Returns how many were given back (entries no longer held are skipped).
local n = 0
for i = 1, #ARGV do
  local entry = ARGV[i]
  if redis.call('LREM', KEYS[1], -1, entry) > 0 then
    local nl1 = string.find(entry, '\n', 1, true)
    local nl2 = nl1 and string.find(entry, '\n', nl1 + 1, true)
    if nl2 then
      local queue, score = string.sub(entry, 1, nl1 - 1), string.sub(entry, nl1 + 1, nl2 - 1)
      if score ~= '' then
        redis.call('ZADD', queue, score, string.sub(entry, nl2 + 1))
      else
        redis.call('RPUSH', queue, string.sub(entry, nl2 + 1))
      end
      n = n + 1
    end
  end
end
return n
