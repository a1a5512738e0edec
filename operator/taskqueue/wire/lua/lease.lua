-- lease.lua: refresh (or, with ARGV[1] = "0", drop) running leases, each only if the caller
-- still owns it. KEYS[1..n] running keys; ARGV[1] lease ms ("0": drop), ARGV[2..n+1] the owner
-- of each key ("<worker id>#<slot>").
-- Returns how many leases were refreshed or dropped. A key that holds another type than a string
-- is not the caller's lease (redis.pcall: GET's error does not stop the others' refresh).
local n = 0
for i = 1, #KEYS do
  if redis.pcall('GET', KEYS[i]) == ARGV[i + 1] then
    if ARGV[1] == '0' then
      redis.call('DEL', KEYS[i])
    else
      redis.call('PEXPIRE', KEYS[i], ARGV[1])
    end
    n = n + 1
  end
end
return n
