package redisjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// readChunk is how many job hashes one pipeline reads.
const readChunk = 500

// Load implements jobs.Store.
func (s *Store) Load(ctx context.Context) (*jobs.Snapshot, error) {
	snap := &jobs.Snapshot{}
	if err := s.convert(ctx); err != nil {
		return nil, err
	}
	if err := s.loadConfig(ctx, snap); err != nil {
		return nil, err
	}
	if err := s.loadJobs(ctx, snap); err != nil {
		return nil, err
	}
	if err := s.loadCrons(ctx, snap); err != nil {
		return nil, err
	}
	if err := s.loadKeys(ctx, snap); err != nil {
		return nil, err
	}
	next, err := s.rdb.HMGet(ctx, s.k.next, "job", "workflow").Result()
	if err != nil {
		return nil, fmt.Errorf("redisjobs: load ids: %w", err)
	}
	if snap.NextJob, err = counter(next[0]); err == nil {
		snap.NextWorkflow, err = counter(next[1])
	}
	if err != nil {
		return nil, fmt.Errorf("redisjobs: load ids from %s: %w", s.k.next, err)
	}
	return snap, nil
}

// counter reads a next-id field: absent is 1.
func counter(v any) (int64, error) {
	str, ok := v.(string)
	if !ok {
		return 1, nil
	}
	n, err := strconv.ParseInt(str, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not a positive integer", str)
	}
	return n, nil
}

func (s *Store) loadConfig(ctx context.Context, snap *jobs.Snapshot) error {
	queues, err := s.rdb.HGetAll(ctx, s.k.queues).Result()
	if err != nil {
		return fmt.Errorf("redisjobs: load queues: %w", err)
	}
	for name, spec := range queues {
		var q jobtype.Queue
		if err := json.Unmarshal([]byte(spec), &q); err != nil {
			return fmt.Errorf("redisjobs: load queue %q: %w", name, err)
		}
		snap.Queues = append(snap.Queues, q)
	}
	sort.Slice(snap.Queues, func(i, j int) bool { return snap.Queues[i].Name < snap.Queues[j].Name })
	limits, err := s.rdb.HGetAll(ctx, s.k.limits).Result()
	if err != nil {
		return fmt.Errorf("redisjobs: load limits: %w", err)
	}
	for pattern, v := range limits {
		l, err := parseLimitValue(pattern, v)
		if err != nil {
			return err
		}
		snap.Limits = append(snap.Limits, l)
	}
	sort.Slice(snap.Limits, func(i, j int) bool { return snap.Limits[i].Pattern < snap.Limits[j].Pattern })
	return nil
}

// loadCrons reads the periodic jobs, sorted by name.
func (s *Store) loadCrons(ctx context.Context, snap *jobs.Snapshot) error {
	all, err := s.rdb.HGetAll(ctx, s.k.crons).Result()
	if err != nil {
		return fmt.Errorf("redisjobs: load periodic jobs: %w", err)
	}
	for name, b := range all {
		var r jobs.CronRecord
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			return fmt.Errorf("redisjobs: load periodic job %q: %w", name, err)
		}
		snap.Crons = append(snap.Crons, r)
	}
	sort.Slice(snap.Crons, func(i, j int) bool { return snap.Crons[i].Name < snap.Crons[j].Name })
	return nil
}

// loadJobs reads the unfinished jobs (queued and running) in id order.
func (s *Store) loadJobs(ctx context.Context, snap *jobs.Snapshot) error {
	members, err := s.rdb.ZRange(ctx, s.k.unfinished, 0, -1).Result()
	if err != nil {
		return fmt.Errorf("redisjobs: load jobs: %w", err)
	}
	ids, err := parseIDs(s.k.unfinished, members)
	if err != nil {
		return err
	}
	unfinished := make(map[int64]bool, len(ids))
	for _, id := range ids {
		unfinished[id] = true
	}
	all, err := s.read(ctx, ids)
	if err != nil {
		return err
	}
	for _, st := range all {
		if st != nil && st.state <= stRunning {
			snap.Jobs = append(snap.Jobs, st.record(unfinished))
		}
	}
	return nil
}

func parseIDs(key string, members []string) ([]int64, error) {
	ids := make([]int64, len(members))
	for i, m := range members {
		n, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redisjobs: %s: member %q is not a job id", key, m)
		}
		ids[i] = n
	}
	return ids, nil
}

// read reads the hashes of ids in pipelines; a job that is gone is nil.
func (s *Store) read(ctx context.Context, ids []int64) ([]*stored, error) {
	out := make([]*stored, 0, len(ids))
	for start := 0; start < len(ids); start += readChunk {
		part := ids[start:min(start+readChunk, len(ids))]
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(part))
		for i, id := range part {
			cmds[i] = pipe.HGetAll(ctx, s.k.job(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("redisjobs: read jobs: %w", err)
		}
		for i, c := range cmds {
			if len(c.Val()) == 0 {
				out = append(out, nil)
				continue
			}
			st, err := parseJob(part[i], c.Val())
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// Job implements jobs.Store.
func (s *Store) Job(ctx context.Context, id int64) (jobtype.Job, error) {
	h, err := s.rdb.HGetAll(ctx, s.k.job(id)).Result()
	if err != nil {
		return jobtype.Job{}, fmt.Errorf("redisjobs: job %d: %w", id, err)
	}
	if len(h) == 0 {
		return jobtype.Job{}, &jobs.FieldError{Msg: fmt.Sprintf("no job %d", id), Kind: jobs.ErrNotFound}
	}
	st, err := parseJob(id, h)
	if err != nil {
		return jobtype.Job{}, err
	}
	return st.job(), nil
}

// Jobs implements jobs.Store. It pages through the narrowest index the
// filter names (workflow, queue, a state's — the unfinished jobs for
// queued; every job: the unfinished and the finished states together),
// newest first with f.Desc, and checks the other conditions on each job
// read; at most f.ScanLimit() ids are examined for one page.
func (s *Store) Jobs(ctx context.Context, f jobs.Filter) (jobs.Page, error) {
	out := jobs.Page{Jobs: []jobtype.Job{}}
	indexes, ok := s.indexes(f)
	if !ok || f.Limit <= 0 {
		return out, nil
	}
	scan := f.ScanLimit()
	for after := f.After; ; {
		ids, err := s.page(ctx, indexes, after, f.Desc, int64(min(max(f.Limit-len(out.Jobs), readChunk), scan)))
		if err != nil {
			return jobs.Page{}, err
		}
		if len(ids) == 0 {
			return out, nil
		}
		all, err := s.read(ctx, ids)
		if err != nil {
			return jobs.Page{}, err
		}
		for i, st := range all {
			if st == nil || !matches(st, f) {
				continue
			}
			j := st.job()
			j.Attempts = nil // a listing leaves the history out, as the SQLite store's does
			out.Jobs = append(out.Jobs, j)
			if len(out.Jobs) == f.Limit {
				out.Next = ids[i]
				return out, nil
			}
		}
		after, scan = ids[len(ids)-1], scan-len(ids)
		if scan <= 0 {
			out.Next = after
			return out, nil
		}
	}
}

// page reads the first count ids after the cursor from the union of the
// indexes, in order (descending when desc; after 0 starts at the end the
// order begins with); several indexes are read in one transaction, so
// that a job moving between them is seen in one.
func (s *Store) page(ctx context.Context, indexes []string, after int64, desc bool, count int64) ([]int64, error) {
	arg := func(key string) redis.ZRangeArgs {
		a := redis.ZRangeArgs{Key: key, ByScore: true, Start: "(" + strconv.FormatInt(after, 10), Stop: "+inf", Count: count}
		if desc { // go-redis sends Stop before Start with Rev
			a.Rev, a.Start, a.Stop = true, "-inf", "+inf"
			if after != 0 {
				a.Stop = "(" + strconv.FormatInt(after, 10)
			}
		}
		return a
	}
	cmds := make([]*redis.StringSliceCmd, len(indexes))
	if len(indexes) == 1 {
		cmds[0] = s.rdb.ZRangeArgs(ctx, arg(indexes[0]))
	} else {
		_, _ = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for i, key := range indexes {
				cmds[i] = p.ZRangeArgs(ctx, arg(key))
			}
			return nil
		})
	}
	var ids []int64
	for i, c := range cmds {
		members, err := c.Result()
		if err != nil {
			return nil, fmt.Errorf("redisjobs: list jobs: %w", err)
		}
		more, err := parseIDs(indexes[i], members)
		if err != nil {
			return nil, err
		}
		ids = append(ids, more...)
	}
	if len(indexes) > 1 {
		slices.Sort(ids)
		ids = slices.Compact(ids)
		if desc {
			slices.Reverse(ids)
		}
		ids = ids[:min(int64(len(ids)), count)]
	}
	return ids, nil
}

// indexes picks the zsets to page through; false when no job can match.
func (s *Store) indexes(f jobs.Filter) ([]string, bool) {
	switch {
	case f.Workflow != "":
		n, err := strconv.ParseInt(f.Workflow, 10, 64)
		return []string{s.k.workflow(n)}, err == nil && n > 0
	case f.Queue != "":
		return []string{s.k.queue(f.Queue)}, true
	case f.State != "":
		c := stateCode(f.State)
		if c < 0 {
			return nil, false
		}
		if c == stQueued {
			return []string{s.k.unfinished}, true
		}
		return []string{s.k.states[c]}, true
	}
	return []string{s.k.unfinished, s.k.states[stSucceeded], s.k.states[stFailed], s.k.states[stCancelled]}, true
}

func matches(st *stored, f jobs.Filter) bool {
	return (f.Queue == "" || st.spec.Queue == f.Queue) &&
		(f.State == "" || stateCode(f.State) == st.state) &&
		(f.Workflow == "" || workflowIs(st.workflow, f.Workflow)) &&
		f.MatchesLabels(st.id, &st.spec, time.UnixMilli(st.created))
}

func workflowIs(wf int64, s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n == wf
}

// WorkflowInfo implements jobs.Store.
func (s *Store) WorkflowInfo(ctx context.Context, id int64) (string, error) {
	name, err := s.rdb.HGet(ctx, s.k.workflows, strconv.FormatInt(id, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return "", &jobs.FieldError{Msg: fmt.Sprintf("no workflow %d", id), Kind: jobs.ErrNotFound}
	}
	if err != nil {
		return "", fmt.Errorf("redisjobs: workflow %d: %w", id, err)
	}
	return name, nil
}

// loadKeys reads the idempotency keys kept, of jobs and of requests.
func (s *Store) loadKeys(ctx context.Context, snap *jobs.Snapshot) error {
	if err := s.loadKeysOf(ctx, s.k.idem, s.k.idemAt, snap); err != nil {
		return fmt.Errorf("redisjobs: load idempotency keys: %w", err)
	}
	if err := s.loadKeysOf(ctx, s.k.reqs, s.k.reqsAt, snap); err != nil {
		return fmt.Errorf("redisjobs: load requests' idempotency keys: %w", err)
	}
	return nil
}

// loadKeysOf reads the keys of one hash (key → job id, or a request's
// runs) and its zset of times, oldest first.
func (s *Store) loadKeysOf(ctx context.Context, hash, times string, snap *jobs.Snapshot) error {
	vals, err := s.rdb.HGetAll(ctx, hash).Result()
	if err != nil || len(vals) == 0 {
		return err
	}
	at, err := s.rdb.ZRangeWithScores(ctx, times, 0, -1).Result()
	if err != nil {
		return err
	}
	for _, z := range at {
		key, _ := z.Member.(string)
		v, ok := vals[key]
		if !ok {
			continue
		}
		k := jobs.IdemKey{Key: key, At: time.UnixMilli(int64(z.Score))}
		if hash == s.k.reqs {
			k.Jobs, err = jobs.ParseRuns(v)
		} else if k.Job, err = strconv.ParseInt(v, 10, 64); err != nil {
			err = fmt.Errorf("key %q: job %q is not an id", key, v)
		}
		if err != nil {
			return err
		}
		snap.Keys = append(snap.Keys, k)
	}
	return nil
}
