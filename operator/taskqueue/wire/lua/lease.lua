-- lease.lua: refresh (or drop) running leases, each only if the caller still owns it.
-- KEYS[1..n]: running lease keys.
local lease_ms = ARGV[1]     -- the new lifetime in ms; "0": drop the leases
local FIRST_OWNER = 2        -- ARGV[2..n+1]: the owner of each key, in KEYS order
                             -- ("<worker id>#<slot>")
-- Returns how many leases were refreshed or dropped. A key that holds another type than a string
-- is not the caller's lease (redis.pcall: GET's error does not stop the others' refresh).
local n = 0
for i = 1, #KEYS do
  local owner = ARGV[FIRST_OWNER + i - 1]
  if redis.pcall('GET', KEYS[i]) == owner then
    if lease_ms == '0' then
      redis.call('DEL', KEYS[i])
    else
      redis.call('PEXPIRE', KEYS[i], lease_ms)
    end
    n = n + 1
  end
end
return n
