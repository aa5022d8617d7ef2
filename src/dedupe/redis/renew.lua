local r = redis.call('HMGET', KEYS[1], 's', 't')
if r[1] ~= 'f' or r[2] ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'l', now + tonumber(ARGV[2]))
return 1
