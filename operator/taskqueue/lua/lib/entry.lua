-- lib/entry.lua (included by `-- include: entry`): the processing/delayed entry format
-- "<queue key>\n<score>\n<element>" (score empty for lists), shared by the scripts.

-- put_back(entry): the element back to the right end of its list (served next) or into its zset
-- with its score; false when `entry` is not in that format (nothing is written then).
local function put_back(entry)
  local nl1 = string.find(entry, '\n', 1, true)
  local nl2 = nl1 and string.find(entry, '\n', nl1 + 1, true)
  if not nl2 then return false end
  local queue, score = string.sub(entry, 1, nl1 - 1), string.sub(entry, nl1 + 1, nl2 - 1)
  if score ~= '' then
    redis.call('ZADD', queue, score, string.sub(entry, nl2 + 1))
  else
    redis.call('RPUSH', queue, string.sub(entry, nl2 + 1))
  end
  return true
end
