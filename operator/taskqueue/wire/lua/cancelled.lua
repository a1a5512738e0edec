-- cancelled.lua: a running task that was cancelled has stopped: take its entry out of the
-- processing list, count it ("cancelled") and spend its cancel; never retried.
-- KEYS[1] processing list, KEYS[2] stats hash, KEYS[3] cancels zset, KEYS[4] flow state hash
-- (lib/flow.lua: the entry leaves the in-flight count of its queue).
-- ARGV[1] held ("1": the entry must still be in KEYS[1], else nothing happens, since a recovery
-- already requeued it; "0": AtMostOnce, not held), ARGV[2] the processing entry, ARGV[3] the
-- task id, ARGV[4] the task index's key prefix ("": tracking off).
-- Returns 1 when applied, 0 when the entry was no longer held. A key holding another type fails
-- the call before any write (WRONGTYPE naming it).
-- include: entry
-- include: count
-- include: flow
-- include: index
-- include: lifecycle
local wrong = misfit({KEYS[1], 'list', KEYS[2], 'hash', KEYS[3], 'zset'})
if wrong then return wrong end
local held = ARGV[1] == '1'
local flow_on, flow_wrong = flow_state_of(KEYS[4])
if held and flow_wrong then return flow_wrong end
if held then
  if redis.call('LREM', KEYS[1], -1, ARGV[2]) == 0 then return 0 end
  flow_gone(flow_on, KEYS[4], ARGV[2])
end
add_count(KEYS[2], CANCELLED, 1)
redis.call('ZREM', KEYS[3], ARGV[3])
track(ARGV[4], ARGV[3], {'state', 'cancelled', 'at', now_ms()})
return 1
