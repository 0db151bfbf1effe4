package jobstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

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
// 10 workflows.created, 11 next, then the keys each change names, in
// order.
// ARGV: 1 token, 2 next job id (0: no insert), 3 next workflow id (0: no
// workflow), 4 how many job ids follow to check, those ids (the jobs the
// batch changes but does not insert first), then the changes: a kind code
// and its arguments.
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
local a, k = 5 + n, 12
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
-- result appends the attempt's result at ARGV[i] to the fields f; it
-- returns f and how many arguments the result took.
local function result(f, i)
  if ARGV[i] ~= '1' then return f, 1 end
  local m = #f
  f[m + 1], f[m + 2], f[m + 3], f[m + 4], f[m + 5], f[m + 6] = 'x', ARGV[i + 1], 'o', ARGV[i + 2], 'e', ARGV[i + 3]
  return f, 4
end
local ops = {}
ops['1'] = function() redis.call('HSET', KEYS[7], ARGV[a], ARGV[a + 1]); a = a + 2 end
ops['2'] = function() redis.call('HDEL', KEYS[7], ARGV[a]); a = a + 1 end
ops['3'] = function()
  if ARGV[a + 1] == '0' then redis.call('HDEL', KEYS[8], ARGV[a])
  else redis.call('HSET', KEYS[8], ARGV[a], ARGV[a + 1]) end
  a = a + 2
end
ops['4'] = function()
  local job, qidx = key(), key()
  local id, p, wf, after = ARGV[a], ARGV[a + 3], ARGV[a + 4], ARGV[a + 6]
  -- ids are never reused (jobs.next only grows): the hash is new
  local f = {'q', ARGV[a + 1], 'st', '0', 'spec', ARGV[a + 2], 'att', '0', 'c', ARGV[a + 5]}
  if p ~= '' then f[#f + 1] = 'p'; f[#f + 1] = p end
  if after ~= '' then f[#f + 1] = 'a'; f[#f + 1] = after end
  if wf ~= '0' then
    f[#f + 1] = 'wf'; f[#f + 1] = wf
    put(key(), id, id)
  end
  redis.call('HSET', job, unpack(f))
  put(KEYS[2], id, id)
  put(qidx, id, id)
  known[id] = 'u'
  a = a + 7
end
ops['5'] = function()
  redis.call('HSET', KEYS[9], ARGV[a], ARGV[a + 1])
  redis.call('ZADD', KEYS[10], ARGV[a + 2], ARGV[a])
  a = a + 3
end
ops['6'] = function()
  local job, id = key(), ARGV[a]
  if known[id] then
    -- a retry time (r) left from a requeue counts only while queued
    redis.call('HSET', job, 'st', '1', 'att', ARGV[a + 1], 'ag', ARGV[a + 2], 's', ARGV[a + 3])
    unfinish(id)
  end
  a = a + 4
end
ops['7'] = function()
  local job, id = key(), ARGV[a]
  local f, used = result({'st', '0', 'r', ARGV[a + 1], 'ag', ''}, a + 2)
  if known[id] then
    redis.call('HSET', job, unpack(f))
    unfinish(id)
  end
  a = a + 2 + used
end
ops['8'] = function()
  local job, id, code, at = key(), ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
  local f, used = result({'st', ARGV[a + 1], 'f', at}, a + 3)
  if known[id] then
    redis.call('HSET', job, unpack(f))
    if known[id] == 'f' then
      for c = 2, 4 do put(KEYS[2 + c], id, false) end
    end
    put(KEYS[2], id, false)
    put(KEYS[3], id, at)
    put(KEYS[2 + code], id, id)
    known[id] = 'f'
  end
  a = a + 3 + used
end
ops['9'] = function()
  local job, id = key(), ARGV[a]
  if known[id] then
    redis.call('HSET', job, 'st', '0', 'att', '0')
    redis.call('HDEL', job, 'ag', 'r', 's', 'f', 'x', 'o', 'e')
    unfinish(id)
  end
  a = a + 1
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

// fixedKeys are KEYS 1-11 of applyScript.
func (s *Store) fixedKeys() []string {
	k := s.k
	return []string{s.fence.Key, k.unfinished, k.finished, k.states[stSucceeded], k.states[stFailed], k.states[stCancelled],
		k.queues, k.limits, k.workflows, k.wfCreated, k.next}
}

// apply writes ops (no prune among them) in one script.
func (s *Store) apply(ctx context.Context, ops []jobs.Op) error {
	enc := encoder{keys: s.fixedKeys(), args: make([]any, 0, 6*len(ops)), n: s.k, seen: map[int64]bool{}}
	for i := range ops {
		if err := enc.op(&ops[i]); err != nil {
			return err
		}
	}
	head := make([]any, 0, 4+len(enc.check)+len(enc.args))
	head = append(head, s.fence.Token, enc.nextJob, enc.nextWF, len(enc.check))
	head = append(head, enc.check...)
	err := applyScript.Run(ctx, s.rdb, enc.keys, append(head, enc.args...)...).Err()
	if err = fenceError(err); err != nil {
		return fmt.Errorf("redis jobstore: writing %d changes: %w", len(ops), err)
	}
	return nil
}

// encoder turns changes into applyScript's KEYS and ARGV.
type encoder struct {
	keys            []string
	args            []any
	n               names
	nextJob, nextWF int64
	// check lists the jobs whose existence the script reads: those a
	// change names before the batch inserts them (seen).
	check []any
	seen  map[int64]bool
}

func (e *encoder) add(args ...any) { e.args = append(e.args, args...) }

// op encodes one change; it refuses a change that lacks what its kind
// needs, before anything is written.
func (e *encoder) op(op *jobs.Op) error {
	switch op.Kind {
	case jobs.OpPutQueue:
		if op.Queue == nil {
			return fmt.Errorf("redis jobstore: put-queue change without a queue")
		}
		spec, err := json.Marshal(op.Queue)
		if err != nil {
			return fmt.Errorf("redis jobstore: queue %q: %w", op.Queue.Name, err)
		}
		e.add("1", op.Queue.Name, spec)
	case jobs.OpDeleteQueue:
		e.add("2", op.Name)
	case jobs.OpPutLimit:
		if op.Limit == nil {
			return fmt.Errorf("redis jobstore: put-limit change without a limit")
		}
		e.add("3", op.Limit.Pattern, op.Limit.Limit)
	case jobs.OpInsert:
		return e.insert(op.Record)
	case jobs.OpWorkflow:
		e.add("5", op.ID, op.Name, op.At.UnixMilli())
		e.nextWF = max(e.nextWF, op.ID+1)
	default:
		return e.jobOp(op)
	}
	return nil
}

// jobOp encodes a change to one job's state.
func (e *encoder) jobOp(op *jobs.Op) error {
	switch op.Kind {
	case jobs.OpStart:
		e.add("6", op.ID, op.Attempt, op.Agent, op.At.UnixMilli())
	case jobs.OpRequeue:
		e.add("7", op.ID, op.At.UnixMilli())
		e.result(op.Result)
	case jobs.OpFinish:
		code := stateCode(op.State)
		if code < stSucceeded {
			return fmt.Errorf("redis jobstore: job %d cannot finish as %q", op.ID, op.State)
		}
		e.add("8", op.ID, code, op.At.UnixMilli())
		e.result(op.Result)
	case jobs.OpReset:
		e.add("9", op.ID)
	default:
		return fmt.Errorf("redis jobstore: unknown change kind %d", op.Kind)
	}
	if !e.seen[op.ID] {
		e.seen[op.ID] = true
		e.check = append(e.check, op.ID)
	}
	e.keys = append(e.keys, e.n.job(op.ID))
	return nil
}

// result encodes an attempt's result, or that there is none (the stored
// one stays).
func (e *encoder) result(r *jobs.Result) {
	if r == nil {
		e.add("0")
		return
	}
	e.add("1", r.ExitCode, r.Output, r.Error)
}

func (e *encoder) insert(r *jobs.Record) error {
	if r == nil {
		return fmt.Errorf("redis jobstore: insert change without a record")
	}
	spec := r.Spec
	spec.Payload = nil
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("redis jobstore: job %d: %w", r.ID, err)
	}
	e.add("4", r.ID, spec.Queue, b, []byte(r.Spec.Payload), r.Workflow, r.CreatedAt.UnixMilli(), joinIDs(r.After))
	e.keys = append(e.keys, e.n.job(r.ID), e.n.queue(spec.Queue))
	if r.Workflow != 0 {
		e.keys = append(e.keys, e.n.workflow(r.Workflow))
	}
	e.seen[r.ID] = true // the script knows it from here on
	e.nextJob = max(e.nextJob, r.ID+1)
	return nil
}

func joinIDs(ids []int64) string {
	var b []byte
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

func stateCode(s jobs.State) int {
	for i, n := range stateNames {
		if jobs.State(n) == s {
			return i
		}
	}
	return -1
}
