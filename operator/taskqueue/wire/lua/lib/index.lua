-- lib/index.lua (included by `-- include: index`): the one writer of a task-index hash
-- `<prefix>:task:<id>` (spec.worker.tracking; taskqueue.wire.lifecycle owns its fields and
-- lifetime in Python): enqueue.lua writes a tracked task's first state, lib/lifecycle.lua every
-- later one.

local TRACK_TTL_MS = 86400000 -- taskqueue.wire.lifecycle.TRACK_TTL_SECONDS * 1000

-- index_write(key, fields): HSET the flat `fields` on the index hash `key` and set its expiry
-- to TRACK_TTL_MS. It follows the moves it records, so it cannot fail the script: a key of
-- another type (not ours to change) is left as it is and the task goes untracked; any other
-- error (an ACL refusal) is raised.
local function index_write(key, fields)
  local set = redis.pcall('HSET', key, unpack(fields))
  if type(set) == 'table' and set['err'] then
    if string.find(set['err'], 'WRONGTYPE', 1, true) then return end
    redis.call('HSET', key, unpack(fields)) -- fails again, on a line that names the command
  end
  redis.call('PEXPIRE', key, TRACK_TTL_MS)
end
