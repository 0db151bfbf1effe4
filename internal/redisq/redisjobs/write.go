package redisjobs

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/jobs"
)

// fenceLua refuses, before anything is written, unless KEYS[1] holds
// ARGV[1] (an empty ARGV[1] checks nothing).
const fenceLua = `
if ARGV[1] ~= '' then
  local cur = redis.call('GET', KEYS[1])
  if cur ~= ARGV[1] then
    return redis.error_reply('FENCED ' .. KEYS[1] .. ' holds ' .. (cur or 'nothing') .. ', not ' .. ARGV[1])
  end
end
`

// foldLua is what the scripts share: variadic commands in chunks (Lua's
// unpack takes a few thousand values at most), and the index changes of
// a batch folded into one ZADD and one ZREM per zset.
//
// put records that member is to be in key's zset with score, or (false)
// out of it; the last call for a member wins, as the same changes made
// one by one in that order would. flush then writes them.
const foldLua = `
local function batched(cmd, key, list, step)
  local out = {}
  for i = 1, #list, step do
    local part = redis.call(cmd, key, unpack(list, i, math.min(i + step - 1, #list)))
    if type(part) == 'table' then
      for j = 1, #part do out[#out + 1] = part[j] end
    end
  end
  return out
end
local idx, touched = {}, {}
local function put(key, member, score)
  local t = idx[key]
  if not t then t = {}; idx[key] = t; touched[#touched + 1] = key end
  t[member] = score
end
local function flush()
  for _, key in ipairs(touched) do
    local add, rem = {}, {}
    for m, score in pairs(idx[key]) do
      if score then add[#add + 1] = score; add[#add + 1] = m else rem[#rem + 1] = m end
    end
    if #rem > 0 then batched('ZREM', key, rem, 1000) end
    if #add > 0 then batched('ZADD', key, add, 2000) end
  end
end
`

// applyScript writes a batch of changes.
//
// KEYS: 1 leader, 2 unfinished, 3 finished, 4-6 the zsets of the finished
// states (state code c is KEYS[2 + c]), 7 queues, 8 limits, 9 workflows,
// 10 workflows.created, 11 next, 12 state:running, then the keys each
// change names, in order.
// ARGV: 1 token, 2 next job id (0: no insert), 3 next workflow id (0: no
// workflow), 4 how many job ids follow to check, those ids (the jobs the
// batch changes but does not insert first), then the changes: a kind
// code and its arguments (the codes below).
//
// A job's hash is written at once, one HSET per change; the index changes
// are folded (foldLua) and written at the end. Whether a job exists, and
// whether it is finished, is read once for the whole batch (ZMSCORE of
// the unfinished, then of the finished set) and followed in known as the
// changes go; a change to a job that does not exist does nothing.
//
// Nothing after the fence can fail on well-formed keys, so a batch is
// written whole or (fenced) not at all.
var applyScript = redis.NewScript(fenceLua + foldLua + `
local n = tonumber(ARGV[4])
local a, k = 5 + n, 13
local function key() k = k + 1; return KEYS[k - 1] end
local known = {} -- id → 'u' (unfinished), 'f' (finished); nil: no such job
if n > 0 then
  local ids, rest = {}, {}
  for i = 1, n do ids[i] = ARGV[4 + i] end
  local u = batched('ZMSCORE', KEYS[2], ids, 1000)
  for i = 1, n do
    if u[i] then known[ids[i]] = 'u' else rest[#rest + 1] = ids[i] end
  end
  if #rest > 0 then
    local f = batched('ZMSCORE', KEYS[3], rest, 1000)
    for i = 1, #rest do if f[i] then known[rest[i]] = 'f' end end
  end
end
-- unfinish records that a job runs again: out of the finished indexes
-- if it was finished.
local function unfinish(id)
  if known[id] == 'f' then
    put(KEYS[2], id, id)
    put(KEYS[3], id, false)
    for c = 2, 4 do put(KEYS[2 + c], id, false) end
  end
  known[id] = 'u'
end
-- result appends the attempt's result at ARGV[i] to the fields f ('1':
-- exit code, output, error; '2': those and the handler's JSON result);
-- it returns f and how many arguments the result took.
local function result(f, i)
  if ARGV[i] ~= '1' and ARGV[i] ~= '2' then return f, 1 end
  local m = #f
  f[m + 1], f[m + 2], f[m + 3], f[m + 4], f[m + 5], f[m + 6] = 'x', ARGV[i + 1], 'o', ARGV[i + 2], 'e', ARGV[i + 3]
  if ARGV[i] == '1' then return f, 4 end
  f[m + 7], f[m + 8] = 'rv', ARGV[i + 4]
  return f, 5
end
-- remember keeps the history entry of a running job's attempt that ends
-- without success (field h: a JSON array, the last 20), from the hash's
-- attempt, agent and start and the result at ARGV[i] (if any).
local function remember(job, ended, i)
  local g = redis.call('HMGET', job, 'st', 'att', 'ag', 's', 'h')
  if g[1] ~= '1' then return end
  local h = {}
  if g[5] then h = cjson.decode(g[5]) end
  local e = {attempt = g[2], agent = g[3] or '', startedAt = g[4] or '', endedAt = ended}
  if ARGV[i] == '1' or ARGV[i] == '2' then
    e.exitCode, e.output, e.error = ARGV[i + 1], string.sub(ARGV[i + 2], -2048), ARGV[i + 3]
  end
  h[#h + 1] = e
  while #h > 20 do table.remove(h, 1) end
  redis.call('HSET', job, 'h', cjson.encode(h))
end
local ops = {}
ops['1'] = function() redis.call('HSET', KEYS[7], ARGV[a], ARGV[a + 1]); a = a + 2 end
ops['2'] = function() redis.call('HDEL', KEYS[7], ARGV[a]); a = a + 1 end
ops['3'] = function()
  if ARGV[a + 1] == '0' then redis.call('HDEL', KEYS[8], ARGV[a])
  else redis.call('HSET', KEYS[8], ARGV[a], ARGV[a + 1]) end
  a = a + 2
end
-- create writes a queued job's hash and indexes. Ids are never reused
-- (jobs.next only grows): the hash is new, or one a prune deleted.
local function create(job, id, q, spec, p, wf, c, after, qidx, wfidx)
  local f = {'q', q, 'st', '0', 'spec', spec, 'att', '0', 'c', c}
  if p ~= '' then f[#f + 1] = 'p'; f[#f + 1] = p end
  if after ~= '' then f[#f + 1] = 'a'; f[#f + 1] = after end
  if wfidx then
    f[#f + 1] = 'wf'; f[#f + 1] = wf
    put(wfidx, id, id)
  end
  redis.call('HSET', job, unpack(f))
  put(KEYS[2], id, id)
  put(qidx, id, id)
  known[id] = 'u'
end
-- 4: a run of inserts that share queue, spec, workflow, creation time
-- and dependencies; then per job its id and payload. Keys: the queue's
-- zset, the workflow's (if any), then each job's hash.
ops['4'] = function()
  local q, spec, wf, c, after, n = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], tonumber(ARGV[a + 5])
  a = a + 6
  local qidx, wfidx = key(), nil
  if wf ~= '0' then wfidx = key() end
  for _ = 1, n do
    local job, id, p = key(), ARGV[a], ARGV[a + 1]
    a = a + 2
    create(job, id, q, spec, p, wf, c, after, qidx, wfidx)
  end
end
ops['5'] = function()
  redis.call('HSET', KEYS[9], ARGV[a], ARGV[a + 1])
  redis.call('ZADD', KEYS[10], ARGV[a + 2], ARGV[a])
  a = a + 3
end
-- 6: a run of starts by one agent at one time; then per job its id and
-- attempt. Keys: each job's hash.
ops['6'] = function()
  local agent, at, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  a = a + 3
  for _ = 1, n do
    local job, id = key(), ARGV[a]
    if known[id] then
      -- a retry time (r) left from a requeue counts only while queued
      redis.call('HSET', job, 'st', '1', 'att', ARGV[a + 1], 'ag', agent, 's', at)
      unfinish(id)
      put(KEYS[12], id, id)
    end
    a = a + 2
  end
end
ops['7'] = function()
  local job, id = key(), ARGV[a]
  local f, used = result({'st', '0', 'r', ARGV[a + 1], 'ag', ''}, a + 3)
  if known[id] then
    if ARGV[a + 3] ~= '0' then remember(job, ARGV[a + 2], a + 3) end
    redis.call('HSET', job, unpack(f))
    unfinish(id)
    put(KEYS[12], id, false)
  end
  a = a + 3 + used
end
-- 8: a run of finishes in one state at one time with one result; then
-- the jobs' ids. Keys: each job's hash.
ops['8'] = function()
  local code, at, ri = tonumber(ARGV[a]), ARGV[a + 1], a + 2
  local f, used = result({'st', ARGV[a], 'f', at}, ri)
  a = a + 2 + used
  local n = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, n do
    local job, id = key(), ARGV[a]
    a = a + 1
    if known[id] then
      if code ~= 2 then remember(job, at, ri) end
      redis.call('HSET', job, unpack(f))
      if known[id] == 'f' then
        for c = 2, 4 do put(KEYS[2 + c], id, false) end
      end
      put(KEYS[2], id, false)
      put(KEYS[12], id, false)
      put(KEYS[3], id, at)
      put(KEYS[2 + code], id, id)
      known[id] = 'f'
    end
  end
end
-- 9: a reset: the job's id, then '1' and what writes the job anew
-- (queue, spec, payload, workflow, creation time, dependencies, the
-- workflow's name), or '0'. Keys: the job's hash, then with '1' the
-- queue's zset and the workflow's (if any). A job that a prune deleted
-- after the engine read it is written anew, with its workflow's row if
-- that went too.
ops['9'] = function()
  local job, id, rec = key(), ARGV[a], ARGV[a + 1]
  a = a + 2
  local q, spec, p, wf, c, after, name, qidx, wfidx
  if rec == '1' then
    q, spec, p, wf, c, after, name = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
    a = a + 7
    qidx = key()
    if wf ~= '0' then wfidx = key() end
  end
  if known[id] then
    redis.call('HSET', job, 'st', '0', 'att', '0')
    redis.call('HDEL', job, 'ag', 'r', 's', 'f', 'x', 'o', 'e', 'pg', 'rv')
    unfinish(id)
    put(KEYS[12], id, false)
  elseif rec == '1' then
    create(job, id, q, spec, p, wf, c, after, qidx, wfidx)
    if wfidx and redis.call('HSETNX', KEYS[9], wf, name) == 1 then
      redis.call('ZADD', KEYS[10], c, wf)
    end
  end
end
-- cp, cd: a periodic job's entry written (name, record JSON) or
-- removed (name). Keys: the crons hash. A fire is an insert (4) followed
-- by cp in the same script, so the tick's job and the entry's lastAt are
-- written together or (fenced) not at all.
ops['cp'] = function() redis.call('HSET', key(), ARGV[a], ARGV[a + 1]); a = a + 2 end
ops['cd'] = function() redis.call('HDEL', key(), ARGV[a]); a = a + 1 end
-- 10: an idempotency key kept: the key, its job's id (a request's key:
-- its jobs' ids as runs), when (unix ms). Keys: the keys' hash and zset
-- (of jobs' keys or of requests' keys).
ops['10'] = function()
  local h, z = key(), key()
  redis.call('HSET', h, ARGV[a], ARGV[a + 1])
  redis.call('ZADD', z, ARGV[a + 2], ARGV[a])
  a = a + 3
end
-- 11: the idempotency keys kept since before ARGV[a] deleted, up to
-- 100,000 (the next prune takes the rest). Keys: as for 10.
ops['11'] = function()
  local h, z = key(), key()
  local old = redis.call('ZRANGEBYSCORE', z, '-inf', '(' .. ARGV[a], 'LIMIT', 0, 100000)
  a = a + 1
  if #old > 0 then
    batched('HDEL', h, old, 1000)
    batched('ZREM', z, old, 1000)
  end
end
-- a: a snooze: the job's id, the attempts that count, when it may run.
-- Keys: the job's hash.
ops['a'] = function()
  local job, id = key(), ARGV[a]
  if known[id] then
    redis.call('HSET', job, 'st', '0', 'att', ARGV[a + 1], 'r', ARGV[a + 2], 'ag', '')
    put(KEYS[12], id, false)
  end
  a = a + 3
end
-- b: a running job's latest progress: its id and the progress as JSON.
-- Keys: the job's hash.
ops['b'] = function()
  local job, id = key(), ARGV[a]
  if known[id] then redis.call('HSET', job, 'pg', ARGV[a + 1]) end
  a = a + 2
end
while a <= #ARGV do
  local kind = ARGV[a]
  a = a + 1
  ops[kind]()
end
flush()
if ARGV[2] ~= '0' or ARGV[3] ~= '0' then
  local cur, set = redis.call('HMGET', KEYS[11], 'job', 'workflow'), {}
  if tonumber(ARGV[2]) > tonumber(cur[1] or '0') then set[#set + 1] = 'job'; set[#set + 1] = ARGV[2] end
  if tonumber(ARGV[3]) > tonumber(cur[2] or '0') then set[#set + 1] = 'workflow'; set[#set + 1] = ARGV[3] end
  if #set > 0 then redis.call('HSET', KEYS[11], unpack(set)) end
end
return #ARGV
`)

// fixedKeys are KEYS 1-12 of applyScript.
func (s *Store) fixedKeys() []string {
	k := s.k
	return []string{s.fence.Key, k.unfinished, k.finished, k.states[stSucceeded], k.states[stFailed], k.states[stCancelled],
		k.queues, k.limits, k.workflows, k.wfCreated, k.next, k.states[stRunning]}
}

// apply writes ops (no prune among them) in one script.
func (s *Store) apply(ctx context.Context, ops []jobs.Op) error {
	sc, err := s.encode(ops)
	if err != nil {
		return err
	}
	err = applyScript.Run(ctx, s.rdb, sc.keys, sc.args...).Err()
	if err = fenceError(err); err != nil {
		return fmt.Errorf("redisjobs: writing %d changes: %w", len(ops), err)
	}
	return nil
}
