-- The applyScript of the Redis jobstore before jobs.unfinished (commit 2b58fd6),
-- fence included: TestLoadConvertsOlderLayout writes an older build's data with it.
-- KEYS: 1 leader, 2 ids, 3-7 the state zsets (codes 0-4), 8 finished, 9 queues,
-- 10 limits, 11 workflows, 12 workflows.created, 13 next, then each change's keys.
-- ARGV: 1 token, 2 next job id, 3 next workflow id, then the changes.
if ARGV[1] ~= '' then
  local cur = redis.call('GET', KEYS[1])
  if cur ~= ARGV[1] then
    return redis.error_reply('FENCED ' .. KEYS[1] .. ' holds ' .. (cur or 'nothing') .. ', not ' .. ARGV[1])
  end
end
local a, k = 4, 14
local function key() k = k + 1; return KEYS[k - 1] end
-- setState moves a job between the state zsets (and out of the finished
-- set when it runs again); false when it is gone. The second result says
-- whether the job has a retry time (field r).
local function setState(job, id, code)
  local got = redis.call('HMGET', job, 'st', 'r')
  local old = tonumber(got[1])
  if not old then return false, false end
  if old >= 0 and old <= 4 then redis.call('ZREM', KEYS[3 + old], id) end
  redis.call('ZADD', KEYS[3 + code], id, id)
  if code < 2 and old >= 2 then redis.call('ZREM', KEYS[8], id) end
  return true, got[2] ~= false
end
local function result(job, i)
  if ARGV[i] == '1' then redis.call('HSET', job, 'x', ARGV[i + 1], 'o', ARGV[i + 2], 'e', ARGV[i + 3]) end
end
local ops = {}
ops['1'] = function() redis.call('HSET', KEYS[9], ARGV[a], ARGV[a + 1]); a = a + 2 end
ops['2'] = function() redis.call('HDEL', KEYS[9], ARGV[a]); a = a + 1 end
ops['3'] = function()
  if ARGV[a + 1] == '0' then redis.call('HDEL', KEYS[10], ARGV[a])
  else redis.call('HSET', KEYS[10], ARGV[a], ARGV[a + 1]) end
  a = a + 2
end
ops['4'] = function()
  local job, qidx = key(), key()
  local id, wf, p, after = ARGV[a], ARGV[a + 4], ARGV[a + 3], ARGV[a + 6]
  -- ids are never reused (jobs.next only grows): the hash is new
  redis.call('HSET', job, 'q', ARGV[a + 1], 'st', 0, 'spec', ARGV[a + 2], 'att', 0, 'c', ARGV[a + 5])
  if p ~= '' then redis.call('HSET', job, 'p', p) end
  if after ~= '' then redis.call('HSET', job, 'a', after) end
  if wf ~= '0' then
    redis.call('HSET', job, 'wf', wf)
    redis.call('ZADD', key(), id, id)
  end
  redis.call('ZADD', KEYS[2], id, id)
  redis.call('ZADD', KEYS[3], id, id)
  redis.call('ZADD', qidx, id, id)
  a = a + 7
end
ops['5'] = function()
  redis.call('HSET', KEYS[11], ARGV[a], ARGV[a + 1])
  redis.call('ZADD', KEYS[12], ARGV[a + 2], ARGV[a])
  a = a + 3
end
ops['6'] = function()
  local job, id = key(), ARGV[a]
  local found, retried = setState(job, id, 1)
  if found then
    redis.call('HSET', job, 'st', 1, 'att', ARGV[a + 1], 'ag', ARGV[a + 2], 's', ARGV[a + 3])
    if retried then redis.call('HDEL', job, 'r') end
  end
  a = a + 4
end
ops['7'] = function()
  local job, id = key(), ARGV[a]
  if setState(job, id, 0) then
    redis.call('HSET', job, 'st', 0, 'r', ARGV[a + 1])
    redis.call('HDEL', job, 'ag')
    result(job, a + 2)
  end
  a = a + 6
end
ops['8'] = function()
  local job, id, code = key(), ARGV[a], tonumber(ARGV[a + 1])
  if setState(job, id, code) then
    redis.call('HSET', job, 'st', code, 'f', ARGV[a + 2])
    redis.call('ZADD', KEYS[8], ARGV[a + 2], id)
    result(job, a + 3)
  end
  a = a + 7
end
ops['9'] = function()
  local job, id = key(), ARGV[a]
  if setState(job, id, 0) then
    redis.call('HSET', job, 'st', 0, 'att', 0)
    redis.call('HDEL', job, 'ag', 'r', 's', 'f', 'x', 'o', 'e')
  end
  a = a + 1
end
while a <= #ARGV do
  local kind = ARGV[a]
  a = a + 1
  ops[kind]()
end
local function bump(field, n)
  if n > tonumber(redis.call('HGET', KEYS[13], field) or '0') then redis.call('HSET', KEYS[13], field, n) end
end
bump('job', tonumber(ARGV[2]))
bump('workflow', tonumber(ARGV[3]))
return #ARGV
