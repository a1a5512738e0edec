-- lib/count.lua (included by `-- include: count`, before lib/moves.lua): the one way the scripts
-- add to a counter of the stats hash. The counters are anyone's to overwrite
-- (`HSET <prefix>:stats taken:q x`), and Redis does not roll back a script that fails half-way:
-- a counter whose value makes HINCRBY fail must not stop a script after it took a task out of
-- its queue. Only the scripts that count carry it, so only they need HINCRBY in their ACL rule
-- (taskqueue.redisio.acl reads the commands a script names; the loader, taskqueue.wire.scripts,
-- splices into a script only the library definitions it uses).

-- add_count(hash, field, n): HINCRBY that a counter's value never fails: a field that holds no
-- integer (or would overflow) is left as it is. Any other error (an ACL refusal) is raised as
-- redis.call raises it.
local function add_count(hash, field, n)
  local reply = redis.pcall('HINCRBY', hash, field, n)
  if type(reply) == 'table' and reply.err and not string.find(reply.err, 'not an integer', 1, true)
      and not string.find(reply.err, 'overflow', 1, true) then
    redis.call('HINCRBY', hash, field, n)
  end
end
