-- complete.lua: idempotent consumption, after the handler succeeded, atomically: record the id
-- as done for the window, drop our running lease, and ack the entry (count 'completed').
-- The done marker is written even when the entry is no longer held (a recovery requeued it while
-- the task was finishing): the effect happened, so the requeued copy must be skipped.
-- KEYS[1] the caller's processing list, KEYS[2] the id's done key, KEYS[3] the id's running key,
-- KEYS[4] stats hash, KEYS[5] flow state hash (lib/flow.lua: the in-flight counts).
-- ARGV[1] the entry, ARGV[2] owner, ARGV[3] window ms, ARGV[4] now (unix ms, the marker's value),
-- ARGV[5] held ("1" | "0").
-- Returns 1 when the entry was acked, 0 when it was not held. A key holding another type fails
-- the call before any write (WRONGTYPE naming it).
-- include: entry
-- include: count
-- include: flow
local held = ARGV[5] == '1'
local wrong = held and misfit({KEYS[1], 'list', KEYS[4], 'hash'})
if wrong then return wrong end
local flow_on, flow_wrong = flow_state(KEYS[5])
if held and flow_wrong then return flow_wrong end
local owner = redis.call('GET', KEYS[3])
redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[3])
if owner == ARGV[2] then redis.call('DEL', KEYS[3]) end
if held and redis.call('LREM', KEYS[1], -1, ARGV[1]) > 0 then
  add_count(KEYS[4], 'completed', 1)
  flow_gone(flow_on, KEYS[5], ARGV[1])
  return 1
end
return 0
