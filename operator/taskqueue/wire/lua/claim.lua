-- claim.lua: idempotent consumption, before a worker runs a task, atomically:
--   the id completed within the window -> ack the entry unrun, count 'duplicates': "done";
--   the entry is no longer held (a recovery already requeued it)  -> do not run it: "gone";
--   another owner's running lease on the id -> defer: the entry leaves the processing list for
--     the delayed zset, due when the lease ends (at most `max_defer_ms` away): "deferred";
--   otherwise take (or renew) the running lease, which lives `lease_ms` unless refreshed: "run".
local processing = KEYS[1]   -- the caller's processing list
local done = KEYS[2]         -- the id's done marker
local running = KEYS[3]      -- the id's running lease
local delayed = KEYS[4]      -- delayed zset
local stats = KEYS[5]        -- stats hash
local flow_state = KEYS[6]   -- flow state hash (lib/flow.lua: the in-flight counts)
local entry = ARGV[1]        -- the processing entry
local owner = ARGV[2]        -- "<worker id>#<slot>"
local lease_ms = ARGV[3]
local held = ARGV[4] == '1'  -- "1": AtLeastOnce, the entry is in `processing`; "0": AtMostOnce
local now = tonumber(ARGV[5])           -- unix ms
local max_defer_ms = tonumber(ARGV[6])  -- longest deferral
-- A key holding another type fails the call before any write (WRONGTYPE naming it).
-- include: entry
-- include: count
-- include: flow
if redis.call('EXISTS', done) == 1 then
  local flow_on, wrong = flow_state_of(flow_state)
  wrong = misfit({processing, 'list', stats, 'hash'}) or (held and wrong)
  if wrong then return wrong end
  if held and redis.call('LREM', processing, -1, entry) > 0 then
    flow_gone(flow_on, flow_state, entry)
  end
  add_count(stats, 'duplicates', 1)
  return 'done'
end
if held and not redis.call('LPOS', processing, entry) then return 'gone' end
local holder = redis.call('GET', running)
if holder and holder ~= owner then
  local wait = redis.call('PTTL', running)
  if wait < 1 or wait > max_defer_ms then wait = max_defer_ms end
  local flow_on, wrong = flow_state_of(flow_state)
  wrong = misfit({delayed, 'zset', stats, 'hash'}) or (held and wrong)
  if wrong then return wrong end
  if held and redis.call('LREM', processing, -1, entry) > 0 then
    flow_gone(flow_on, flow_state, entry)
  end
  redis.call('ZADD', delayed, now + wait, entry)
  add_count(stats, 'deferred', 1)
  return 'deferred'
end
redis.call('SET', running, owner, 'PX', lease_ms)
return 'run'
