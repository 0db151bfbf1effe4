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

// applyScript writes a batch of changes.
//
// KEYS: 1 leader, 2 ids, 3-7 the state zsets (codes 0-4), 8 finished,
// 9 queues, 10 limits, 11 workflows, 12 workflows.created, 13 next, then
// the keys each change names, in order.
// ARGV: 1 token, 2 next job id (0: no insert), 3 next workflow id (0: no
// workflow), then the changes: a kind code and its fixed arguments.
//
// Nothing after the fence can fail on well-formed keys, so a batch is
// written whole or (fenced) not at all.
var applyScript = redis.NewScript(fenceLua + `
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
`)

// fixedKeys are KEYS 1-13 of applyScript.
func (s *Store) fixedKeys() []string {
	k := s.k
	return append([]string{s.fence.Key, k.ids}, k.states[0], k.states[1], k.states[2], k.states[3], k.states[4],
		k.finished, k.queues, k.limits, k.workflows, k.wfCreated, k.next)
}

// apply writes ops (no prune among them) in one script.
func (s *Store) apply(ctx context.Context, ops []jobs.Op) error {
	enc := encoder{keys: s.fixedKeys(), args: make([]any, 3, 3+6*len(ops)), n: s.k}
	enc.args[0] = s.fence.Token
	for i := range ops {
		if err := enc.op(&ops[i]); err != nil {
			return err
		}
	}
	enc.args[1], enc.args[2] = enc.nextJob, enc.nextWF
	err := applyScript.Run(ctx, s.rdb, enc.keys, enc.args...).Err()
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
	e.keys = append(e.keys, e.n.job(op.ID))
	return nil
}

// result encodes an attempt's result, or that there is none (the stored
// one stays).
func (e *encoder) result(r *jobs.Result) {
	if r == nil {
		e.add("0", "", "", "")
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
