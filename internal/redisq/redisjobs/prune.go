package redisjobs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// pruneLimit bounds the jobs one prune deletes, as in the SQLite store.
const pruneLimit = 100000

// pruneChunk is how many jobs or workflows one prune script deletes.
const pruneChunk = 1000

// pruneJobsScript deletes finished jobs that finished before a cut.
//
// KEYS: 1 leader, 2 finished, 3 unfinished, 4-6 the zsets of the finished
// states (state code c is KEYS[c + 2]), 7 state:running, then per job its
// hash, its queue's zset (when it has a queue) and its workflow's zset
// (when it has one).
// ARGV: 1 token, 2 the cut (unix ms), then per job: id, has-queue (1/0),
// workflow id (0: none). A job that is no longer finished before the cut
// stays; one whose hash is gone leaves every index. The hashes go in one
// DEL, and each index loses its members in one ZREM (foldLua).
var pruneJobsScript = redis.NewScript(fenceLua + foldLua + `
local cut, a, k, gone = tonumber(ARGV[2]), 3, 8, {}
while a <= #ARGV do
  local id, hasQ, wf = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  a = a + 3
  local job, qidx, wfidx = KEYS[k], nil, nil
  k = k + 1
  if hasQ == '1' then qidx = KEYS[k]; k = k + 1 end
  if wf ~= '0' then wfidx = KEYS[k]; k = k + 1 end
  local got = redis.call('HMGET', job, 'st', 'f')
  local st, f = tonumber(got[1]), tonumber(got[2])
  if st == nil or (st >= 2 and st <= 4 and f ~= nil and f < cut) then
    gone[#gone + 1] = job
    put(KEYS[2], id, false)
    if st then
      put(KEYS[st + 2], id, false)
    else
      put(KEYS[3], id, false)
      put(KEYS[7], id, false)
      for c = 2, 4 do put(KEYS[c + 2], id, false) end
    end
    if qidx then put(qidx, id, false) end
    if wfidx then put(wfidx, id, false) end
  end
end
for i = 1, #gone, 1000 do redis.call('DEL', unpack(gone, i, math.min(i + 999, #gone))) end
flush()
return #gone
`)

// pruneWorkflowsScript deletes workflows without jobs.
//
// KEYS: 1 leader, 2 workflows, 3 workflows.created, then per workflow the
// zset of its jobs. ARGV: 1 token, then the workflow ids.
var pruneWorkflowsScript = redis.NewScript(fenceLua + `
for i = 2, #ARGV do
  if redis.call('ZCARD', KEYS[i + 2]) == 0 then
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[3], ARGV[i])
  end
end
return 1
`)

// prune deletes the jobs that finished before at (up to pruneLimit), then
// the workflows created before at that have no jobs left.
func (s *Store) prune(ctx context.Context, at time.Time) error {
	cut := at.UnixMilli()
	ids, err := s.before(ctx, s.k.finished, cut, pruneLimit)
	if err != nil {
		return err
	}
	for len(ids) > 0 {
		n := min(len(ids), pruneChunk)
		if err := s.pruneJobs(ctx, cut, ids[:n]); err != nil {
			return err
		}
		ids = ids[n:]
	}
	wfs, err := s.before(ctx, s.k.wfCreated, cut, 0)
	if err != nil {
		return err
	}
	for len(wfs) > 0 {
		n := min(len(wfs), pruneChunk)
		if err := s.pruneWorkflows(ctx, wfs[:n]); err != nil {
			return err
		}
		wfs = wfs[n:]
	}
	return nil
}

// before lists the members of a zset scored below cut, at most limit of
// them (0: all).
func (s *Store) before(ctx context.Context, key string, cut int64, limit int64) ([]string, error) {
	arg := redis.ZRangeArgs{Key: key, Start: "-inf", Stop: "(" + strconv.FormatInt(cut, 10), ByScore: true}
	if limit > 0 {
		arg.Count = limit
	}
	ids, err := s.rdb.ZRangeArgs(ctx, arg).Result()
	if err != nil {
		return nil, fmt.Errorf("redisjobs: prune: reading %s: %w", key, err)
	}
	return ids, nil
}

func (s *Store) pruneJobs(ctx context.Context, cut int64, ids []string) error {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, s.k.jobOf(id), "q", "wf")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redisjobs: prune: reading jobs: %w", err)
	}
	keys := []string{s.fence.Key, s.k.finished, s.k.unfinished, s.k.states[stSucceeded], s.k.states[stFailed], s.k.states[stCancelled],
		s.k.states[stRunning]}
	args := []any{s.fence.Token, cut}
	for i, id := range ids {
		keys = append(keys, s.k.jobOf(id))
		v := cmds[i].Val()
		q, hasQ := v[0].(string)
		wf, _ := v[1].(string)
		n, err := strconv.ParseInt(wf, 10, 64)
		if err != nil || n <= 0 {
			wf = "0"
		}
		args = append(args, id, boolArg(hasQ), wf)
		if hasQ {
			keys = append(keys, s.k.queue(q))
		}
		if wf != "0" {
			keys = append(keys, s.k.workflow(n))
		}
	}
	if err := fenceError(pruneJobsScript.Run(ctx, s.rdb, keys, args...).Err()); err != nil {
		return fmt.Errorf("redisjobs: prune %d jobs: %w", len(ids), err)
	}
	return nil
}

func (s *Store) pruneWorkflows(ctx context.Context, wfs []string) error {
	keys := []string{s.fence.Key, s.k.workflows, s.k.wfCreated}
	args := []any{s.fence.Token}
	for _, wf := range wfs {
		n, err := strconv.ParseInt(wf, 10, 64)
		if err != nil {
			n = 0 // a foreign member: its zset is empty, so it goes
		}
		keys = append(keys, s.k.workflow(n))
		args = append(args, wf)
	}
	if err := fenceError(pruneWorkflowsScript.Run(ctx, s.rdb, keys, args...).Err()); err != nil {
		return fmt.Errorf("redisjobs: prune %d workflows: %w", len(wfs), err)
	}
	return nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
