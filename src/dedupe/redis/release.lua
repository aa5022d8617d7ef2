local r = redis.call('HMGET', KEYS[1], 's', 't')
if r[1] ~= 'f' or r[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
