-- claim.lua: idempotent consumption, before a worker runs a task, atomically:
--   the id completed within the window -> ack the entry unrun, count 'duplicates': "done";
--   the entry is no longer held (a recovery already requeued it)  -> do not run it: "gone";
--   another owner's running lease on the id -> defer: the entry leaves the processing list for
--     the delayed zset, due when the lease ends (at most ARGV[6] ms away): "deferred";
--   otherwise take (or renew) the running lease, which lives ARGV[3] ms unless refreshed: "run".
-- KEYS[1] the caller's processing list, KEYS[2] the id's done key, KEYS[3] the id's running key,
-- KEYS[4] delayed zset, KEYS[5] stats hash, KEYS[6] flow state hash (lib/flow.lua: the in-flight
-- counts).
-- ARGV[1] the entry, ARGV[2] owner ("<worker id>#<slot>"), ARGV[3] lease ms, ARGV[4] held
-- ("1": AtLeastOnce, the entry is in KEYS[1]; "0": AtMostOnce), ARGV[5] now (unix ms),
-- ARGV[6] longest deferral (ms).
-- A key holding another type fails the call before any write (WRONGTYPE naming it).
-- include: entry
-- include: count
-- include: flow
local held = ARGV[4] == '1'
if redis.call('EXISTS', KEYS[2]) == 1 then
  local flow_on, wrong = flow_state(KEYS[6])
  wrong = misfit({KEYS[1], 'list', KEYS[5], 'hash'}) or (held and wrong)
  if wrong then return wrong end
  if held and redis.call('LREM', KEYS[1], -1, ARGV[1]) > 0 then flow_gone(flow_on, KEYS[6], ARGV[1]) end
  add_count(KEYS[5], 'duplicates', 1)
  return 'done'
end
if held and not redis.call('LPOS', KEYS[1], ARGV[1]) then return 'gone' end
local owner = redis.call('GET', KEYS[3])
if owner and owner ~= ARGV[2] then
  local wait = redis.call('PTTL', KEYS[3])
  if wait < 1 or wait > tonumber(ARGV[6]) then wait = tonumber(ARGV[6]) end
  local flow_on, wrong = flow_state(KEYS[6])
  wrong = misfit({KEYS[4], 'zset', KEYS[5], 'hash'}) or (held and wrong)
  if wrong then return wrong end
  if held and redis.call('LREM', KEYS[1], -1, ARGV[1]) > 0 then flow_gone(flow_on, KEYS[6], ARGV[1]) end
  redis.call('ZADD', KEYS[4], tonumber(ARGV[5]) + wait, ARGV[1])
  add_count(KEYS[5], 'deferred', 1)
  return 'deferred'
end
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
return 'run'
