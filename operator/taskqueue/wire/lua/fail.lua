-- fail.lua: a failed attempt, atomically: take the entry out of the processing list, then either
-- schedule the retry in the delayed zset or push the dead-letter record, and count it.
-- KEYS[1] processing list, KEYS[2] delayed zset, KEYS[3] dead-letter list, KEYS[4] stats hash,
-- KEYS[5] flow state hash (lib/flow.lua: the in-flight counts).
-- ARGV[1] held ("1": the entry must still be in KEYS[1], else nothing happens, since a recovery
-- already requeued it; "0": AtMostOnce, not held), ARGV[2] the processing entry,
-- ARGV[3] "retry" | "dead", ARGV[4] the new delayed entry or the dead-letter record,
-- ARGV[5] due time of the retry (unix ms), ARGV[6] dead-letter list's maximum length.
-- Returns 1 when applied, 0 when the entry was no longer held. A key holding another type fails
-- the call before any write (WRONGTYPE naming it): the entry stays held.
-- include: entry
-- include: count
-- include: moves
-- include: flow
local retry = ARGV[3] == 'retry'
local wrong = misfit({KEYS[1], 'list', retry and KEYS[2] or KEYS[3], retry and 'zset' or 'list',
  KEYS[4], 'hash'})
if wrong then return wrong end
local flow_on, flow_wrong = flow_state(KEYS[5])
if ARGV[1] == '1' and flow_wrong then return flow_wrong end
if ARGV[1] == '1' then
  if redis.call('LREM', KEYS[1], -1, ARGV[2]) == 0 then return 0 end
  flow_gone(flow_on, KEYS[5], ARGV[2])
end
add_count(KEYS[4], 'failed', 1)
if retry then
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[4])
  add_count(KEYS[4], 'retried', 1)
else
  push_dead(KEYS[3], KEYS[4], tonumber(ARGV[6]), ARGV[4])
end
return 1
