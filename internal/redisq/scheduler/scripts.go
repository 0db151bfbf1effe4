package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Every script takes every key it touches in KEYS. The write scripts are
// fenced: KEYS[1] is scheduler.leader and ARGV[1] the leader's token, and
// they change nothing unless the two match.

// fence is the prelude of every write script. It also defines
// wrongType(i, type, …), which names the first KEYS[i] holding a value of
// another type, and isHash(key): a script checks the keys it writes before
// its first write (Redis does not undo the writes of a script that fails),
// and a task key that is not a hash counts as gone.
const fence = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED not the leader') end
local function wrongType(...)
  local a = {...}
  for i = 1, #a, 2 do
    local t = redis.call('TYPE', KEYS[a[i]]).ok
    if t ~= 'none' and t ~= a[i + 1] then return KEYS[a[i]] end
  end
  return nil
end
local function isHash(key) return redis.call('TYPE', key).ok == 'hash' end
`

// typeCheck fails a script whose core keys hold foreign values.
func typeCheck(pairs string) string {
	return "local bad = wrongType(" + pairs + ")\nif bad then return redis.error_reply('WRONGTYPE foreign value in ' .. bad) end\n"
}

// acquireScript takes the lead when nobody holds it: KEYS leader, epoch;
// ARGV node, lease ms. It returns the new token, or false.
var acquireScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local token = redis.call('INCR', KEYS[2]) .. ':' .. ARGV[1]
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
return token`)

// renewScript extends the lease while it is ours: KEYS leader; ARGV token,
// lease ms. It returns 1, or 0 when another holds it (or nobody).
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`)

// resignScript gives the lead up: KEYS leader; ARGV token.
var resignScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])`)

// takeIncomingScript takes the first n IDs of queue.incoming, which the
// caller read, and queues them: KEYS leader, incoming, queue, executing,
// task:ID…; ARGV token, ",ms,ms,…," (the valid durations), n, ID….
// Per ID it returns {verdict, duration}: gone (no task hash), dup (queued
// or running already), interactive (not queued: the caller starts or
// denies it), queued (ZADD with score max+1) or bad (no valid duration).
var takeIncomingScript = redis.NewScript(fence + typeCheck("2, 'list', 3, 'zset', 4, 'hash'") + `
local n = tonumber(ARGV[3])
local head = redis.call('LRANGE', KEYS[2], 0, n - 1)
if #head ~= n then return redis.error_reply('STALE incoming changed') end
for i = 1, n do
  if head[i] ~= ARGV[3 + i] then return redis.error_reply('STALE incoming changed') end
end
local top = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
local score = 0
if #top > 0 then score = tonumber(top[2]) end
local out, add = {}, {}
for i = 1, n do
  local id, task = ARGV[3 + i], KEYS[4 + i]
  if not isHash(task) then
    out[i] = {'gone', ''}
  elseif redis.call('ZSCORE', KEYS[3], id) or redis.call('HEXISTS', KEYS[4], id) == 1 or add[id] then
    out[i] = {'dup', ''}
  else
    local f = redis.call('HMGET', task, 'duration', 'interactive')
    local d = f[1] or ''
    if f[2] == '1' then
      out[i] = {'interactive', d}
    elseif d ~= '' and string.find(ARGV[2], ',' .. d .. ',', 1, true) then
      out[i] = {'queued', d}
      add[id] = true
    else
      out[i] = {'bad', d}
    end
  end
end
redis.call('LTRIM', KEYS[2], n, -1)
for i = 1, n do
  if out[i][1] == 'queued' then
    score = score + 1
    redis.call('ZADD', KEYS[3], score, ARGV[3 + i])
  end
end
return out`)

// takeFinishedScript takes up to ARGV[2] IDs of queue.finished and frees
// what they held: KEYS leader, finished, queue, executing; ARGV token, max.
// It returns {ID, in queue (0/1), in executing (0/1)}… and the IDs left.
var takeFinishedScript = redis.NewScript(fence + typeCheck("2, 'list', 3, 'zset', 4, 'hash'") + `
local max = tonumber(ARGV[2])
local ids = redis.call('LRANGE', KEYS[2], 0, max - 1)
redis.call('LTRIM', KEYS[2], #ids, -1)
local out = {}
for i, id in ipairs(ids) do
  out[i] = {id, redis.call('ZREM', KEYS[3], id), redis.call('HDEL', KEYS[4], id)}
end
return {out, redis.call('LLEN', KEYS[2])}`)

// takeUpdatedScript empties backend.updated and counts the live backends:
// KEYS leader, updated, backend.set; ARGV token. It returns {IDs, count}.
var takeUpdatedScript = redis.NewScript(fence + typeCheck("2, 'list', 3, 'set'") + `
local ids = redis.call('LRANGE', KEYS[2], 0, -1)
redis.call('DEL', KEYS[2])
return {ids, redis.call('SCARD', KEYS[3])}`)

// applyScript carries out the core's decisions in order: KEYS leader,
// queue, executing, outcoming, then task:ID and task:ID:control per op;
// ARGV token, now (unix ms), ttl ms, then 4 per op: kind, ID, a, b.
//
//	assign  a = queue.executing value, b = timeout ms ("" for none):
//	        ZREM queue, HSET executing, HSET task started/timeout, XADD
//	timeout a = ms: HSET executing and task timeout, RPUSH control "timeout MS"
//	end     b = text: HDEL executing, RPUSH control "end TEXT"
//	deny    b = text: RPUSH control "denied TEXT"
//	drop    ZREM queue, HDEL executing
//
// Control messages and task fields are written only while task:ID exists.
// It returns 1 per op that found its task, 0 otherwise.
var applyScript = redis.NewScript(fence + typeCheck("2, 'zset', 3, 'hash', 4, 'stream'") + `
local now, ttl = ARGV[2], ARGV[3]
local out = {}
local op = 0
for i = 4, #ARGV, 4 do
  op = op + 1
  local kind, id, a, b = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local task, control = KEYS[3 + 2 * op], KEYS[4 + 2 * op]
  local live = isHash(task)
  if kind == 'assign' then
    redis.call('ZREM', KEYS[2], id)
    if live then
      redis.call('HSET', KEYS[3], id, a)
      redis.call('HSET', task, 'started', now)
      if b ~= '' then redis.call('HSET', task, 'timeout', b) end
      redis.call('XADD', KEYS[4], '*', 'task', id)
    end
  elseif kind == 'timeout' then
    if live then
      redis.call('HSET', KEYS[3], id, a)
      redis.call('HSET', task, 'timeout', a)
      redis.pcall('RPUSH', control, 'timeout ' .. a)
      redis.pcall('PEXPIRE', control, ttl)
    end
  elseif kind == 'end' or kind == 'deny' then
    if kind == 'end' then redis.call('HDEL', KEYS[3], id) end
    if live then
      redis.pcall('RPUSH', control, b)
      redis.pcall('PEXPIRE', control, ttl)
    end
  elseif kind == 'drop' then
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
  end
  out[op] = live and 1 or 0
end
return out`)

// estimateScript sends queue estimates: KEYS leader, then task:ID and
// task:ID:queue.estimate per task; ARGV token, ttl ms, then position and
// estimate per task. Tasks whose hash is gone are skipped.
var estimateScript = redis.NewScript(fence + `
local ttl = ARGV[2]
for i = 2, #KEYS, 2 do
  if isHash(KEYS[i]) then
    redis.call('HSET', KEYS[i], 'position', ARGV[1 + i])
    redis.pcall('RPUSH', KEYS[i + 1], ARGV[2 + i])
    redis.pcall('PEXPIRE', KEYS[i + 1], ttl)
  end
end
return 1`)

// abortPendingScript ends tasks whose queue.outcoming entry a backend read
// but never took: KEYS leader, outcoming, executing, then task:ID and
// task:ID:control per entry; ARGV token, group, ttl ms, text, then entry
// ID and task ID per entry ("" when the entry names none). It returns per
// entry 1 when the task held a slot.
var abortPendingScript = redis.NewScript(fence + typeCheck("2, 'stream', 3, 'hash'") + `
local out = {}
local n = 0
for i = 5, #ARGV, 2 do
  n = n + 1
  local entry, id = ARGV[i], ARGV[i + 1]
  redis.call('XACK', KEYS[2], ARGV[2], entry)
  redis.call('XDEL', KEYS[2], entry)
  out[n] = 0
  if id ~= '' then
    out[n] = redis.call('HDEL', KEYS[3], id)
    if isHash(KEYS[2 + 2 * n]) then
      redis.pcall('RPUSH', KEYS[3 + 2 * n], ARGV[4])
      redis.pcall('PEXPIRE', KEYS[3 + 2 * n], ARGV[3])
    end
  end
end
return out`)

// sweepProcessingScript drops IDs of queue.processing whose task hash is
// gone: KEYS leader, processing, executing, task:ID…; ARGV token, ID….
// It returns the IDs dropped.
var sweepProcessingScript = redis.NewScript(fence + typeCheck("2, 'set', 3, 'hash'") + `
local out = {}
for i = 2, #ARGV do
  if redis.call('EXISTS', KEYS[2 + i]) == 0 then
    redis.call('SREM', KEYS[2], ARGV[i])
    redis.call('HDEL', KEYS[3], ARGV[i])
    out[#out + 1] = ARGV[i]
  end
end
return out`)

// sweepBackendsScript drops backends whose heartbeat expired: KEYS leader,
// backend.set, backend:ID…; ARGV token, ID…. It returns {IDs dropped,
// live count}.
var sweepBackendsScript = redis.NewScript(fence + typeCheck("2, 'set'") + `
local out = {}
for i = 2, #ARGV do
  if redis.call('EXISTS', KEYS[1 + i]) == 0 then
    redis.call('SREM', KEYS[2], ARGV[i])
    out[#out + 1] = ARGV[i]
  end
end
return {out, redis.call('SCARD', KEYS[2])}`)

// Errors of the fenced scripts.
var (
	// errFenced: the lease is another's; the caller steps down.
	errFenced = errors.New("fenced: another scheduler leads")
	// errStale: queue.incoming changed between reading and taking.
	errStale = errors.New("queue.incoming changed under the take")
)

// runScript runs a fenced script and classifies its refusal.
func runScript(ctx context.Context, c redis.Scripter, s *redis.Script, what string, keys []string, args ...any) (any, error) {
	v, err := s.Run(ctx, c, keys, args...).Result()
	switch {
	case err == nil:
		return v, nil
	case strings.HasPrefix(err.Error(), "FENCED"):
		return nil, fmt.Errorf("%s: %w", what, errFenced)
	case strings.HasPrefix(err.Error(), "STALE"):
		return nil, fmt.Errorf("%s: %w", what, errStale)
	}
	return nil, fmt.Errorf("%s: %w", what, err)
}
