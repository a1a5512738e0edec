-- complete.lua: idempotent consumption, after the handler succeeded, atomically: record the id
-- as done for the window, drop our running lease, and ack the entry (count 'completed').
-- The done marker is written even when the entry is no longer held (a recovery requeued it while
-- the task was finishing): the effect happened, so the requeued copy must be skipped.
local processing = KEYS[1]   -- the caller's processing list
local done = KEYS[2]         -- the id's done marker
local running = KEYS[3]      -- the id's running lease
local stats = KEYS[4]        -- stats hash
local flow_state = KEYS[5]   -- flow state hash (lib/flow.lua: the in-flight counts)
local entry = ARGV[1]        -- the processing entry
local owner = ARGV[2]        -- "<worker id>#<slot>"
local window_ms = ARGV[3]    -- how long the done marker lives
local now = ARGV[4]          -- unix ms, the marker's value
local held = ARGV[5] == '1'  -- "1": AtLeastOnce, the entry is in `processing`; "0": AtMostOnce
-- Returns 1 when the entry was acked, 0 when it was not held. A key holding another type fails
-- the call before any write (WRONGTYPE naming it).
-- include: entry
-- include: count
-- include: flow
local wrong = held and misfit({processing, 'list', stats, 'hash'})
if wrong then return wrong end
local flow_on, flow_wrong = flow_state_of(flow_state)
if held and flow_wrong then return flow_wrong end
local holder = redis.call('GET', running)
redis.call('SET', done, now, 'PX', window_ms)
if holder == owner then redis.call('DEL', running) end
if held and redis.call('LREM', processing, -1, entry) > 0 then
  add_count(stats, 'completed', 1)
  flow_gone(flow_on, flow_state, entry)
  return 1
end
return 0
