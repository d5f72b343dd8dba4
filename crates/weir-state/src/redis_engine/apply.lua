-- Applies the committed outcomes of one key of one state (Weir keyed state, Redis engine).
--
-- KEYS[1] data key (string, hash, list or set), KEYS[2] the state's index (sorted set),
-- KEYS[3] the set-value hash of a set state, KEYS[4] the job's set of state shards.
-- ARGV[1] kind: v(alue), m(ap), l(ist), s(et); ARGV[2] the key part (index member);
-- ARGV[3] the state prefix (shards member); ARGV[4] Redis expiry in ms (0: none); then triples
-- of (p(ut) or d(elete), sub-key, stored value), in sub-key order.
local data, index, setvalues, shards = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kind, member, state, expire_ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local n = #ARGV

-- A list position: the sub-key is a u64, big-endian.
local function position(sub)
  if #sub ~= 8 then
    return redis.error_reply('a list entry has a sub-key of ' .. #sub .. ' bytes, not 8')
  end
  local p = 0
  for j = 1, 8 do p = p * 256 + string.byte(sub, j) end
  return p
end

-- A stored value that is only an empty expiry header (no deadline, no payload).
local plain = string.rep('\0', 8)

if kind == 'v' then
  for i = 5, n, 3 do
    if ARGV[i + 1] ~= '' then
      return redis.error_reply('a value state entry has a sub-key')
    end
    if ARGV[i] == 'p' then redis.call('SET', data, ARGV[i + 2]) else redis.call('DEL', data) end
  end
elseif kind == 'm' then
  for i = 5, n, 3 do
    if ARGV[i] == 'p' then
      redis.call('HSET', data, ARGV[i + 1], ARGV[i + 2])
    else
      redis.call('HDEL', data, ARGV[i + 1])
    end
  end
elseif kind == 's' then
  for i = 5, n, 3 do
    if ARGV[i] == 'p' then
      redis.call('SADD', data, ARGV[i + 1])
      if ARGV[i + 2] == plain then
        redis.call('HDEL', setvalues, ARGV[i + 1])
      else
        redis.call('HSET', setvalues, ARGV[i + 1], ARGV[i + 2])
      end
    else
      redis.call('SREM', data, ARGV[i + 1])
      redis.call('HDEL', setvalues, ARGV[i + 1])
    end
  end
elseif kind == 'l' then
  -- Removals take a suffix off the list; every position of that suffix must be removed or
  -- written again, or the list would have a hole.
  local len = redis.call('LLEN', data)
  local cut = nil
  local touched = {}
  for i = 5, n, 3 do
    local p = position(ARGV[i + 1])
    if type(p) == 'table' then return p end
    touched[p] = true
    if ARGV[i] == 'd' and (cut == nil or p < cut) then cut = p end
  end
  if cut ~= nil and cut < len then
    for p = cut, len - 1 do
      if not touched[p] then
        return redis.error_reply('removing list position ' .. cut .. ' of ' .. len ..
          ' would leave position ' .. p .. ' behind a hole')
      end
    end
    if cut == 0 then redis.call('DEL', data) else redis.call('LTRIM', data, 0, cut - 1) end
    len = cut
  end
  for i = 5, n, 3 do
    if ARGV[i] == 'p' then
      local p = position(ARGV[i + 1])
      if p < len then
        redis.call('LSET', data, p, ARGV[i + 2])
      elseif p == len then
        redis.call('RPUSH', data, ARGV[i + 2])
        len = len + 1
      else
        return redis.error_reply('list position ' .. p .. ' lies past the end (' .. len .. ')')
      end
    end
  end
else
  return redis.error_reply('unknown state kind ' .. kind)
end

if redis.call('EXISTS', data) == 1 then
  redis.call('ZADD', index, 0, member)
  redis.call('SADD', shards, state)
  if expire_ms > 0 then
    redis.call('PEXPIRE', data, expire_ms)
    if kind == 's' and redis.call('EXISTS', setvalues) == 1 then
      redis.call('PEXPIRE', setvalues, expire_ms)
    end
  end
else
  redis.call('ZREM', index, member)
  redis.call('DEL', setvalues)
end
return 0
