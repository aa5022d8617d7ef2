local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
local r = redis.call('HMGET', KEYS[1], 's', 'fp', 'g', 'l', 'r')
if not r[1] then
  redis.call('HSET', KEYS[1], 's', 'f', 'fp', ARGV[1], 't', ARGV[2], 'g', 1, 'l', now + lease)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {'claimed', 1}
end
if r[2] ~= ARGV[1] then return {'conflict', r[2]} end
if r[1] == 'f' then
  local left = tonumber(r[4]) - now
  if left > 0 then return {'in_flight', left} end
  if ARGV[5] == '1' then
    local g = tonumber(r[3]) + 1
    redis.call('HSET', KEYS[1], 't', ARGV[2], 'g', g, 'l', now + lease)
    redis.call('PEXPIRE', KEYS[1], ARGV[4])
    return {'claimed', g}
  end
  redis.call('HSET', KEYS[1], 's', 'a')
  redis.call('HDEL', KEYS[1], 't', 'l')
  return {'abandoned'}
end
if r[1] == 'a' then return {'abandoned'} end
return {'done', r[1], r[5]}
