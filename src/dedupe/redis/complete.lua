local r = redis.call('HMGET', KEYS[1], 's', 't')
if r[2] ~= ARGV[1] then return 0 end
if r[1] ~= 'f' then return 1 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'r', ARGV[3])
redis.call('HDEL', KEYS[1], 'l')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
