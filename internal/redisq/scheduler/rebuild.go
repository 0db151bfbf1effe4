package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/sched"
)

// snapshotRedis is what a new leader reads to rebuild the core.
type snapshotRedis struct {
	backends  int
	executing map[string]string // ID → ms or "interactive"
	queued    []string          // in score order
	fields    map[string][]any  // ID → duration, interactive, started
}

// rebuild starts a leadership: the core from Redis, with the live backends
// as one push worker, the running tasks adopted in the tiers they hold and
// the queued ones submitted in score order. Inconsistencies (a running or
// queued task whose hash is gone) become ops that the first settle writes.
func (s *Scheduler) rebuild(ctx context.Context, token string) (*leader, error) {
	l, err := newLeader(s, token)
	if err != nil {
		return nil, err
	}
	if err := l.ensureGroup(ctx); err != nil {
		return nil, err
	}
	snap, err := l.readRedis(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.setBackends(snap.backends); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(snap.executing))
	for id := range snap.executing {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		l.adopt(id, snap.executing[id], snap.fields[id])
	}
	for _, id := range snap.queued {
		l.requeue(id, snap.fields[id])
	}
	s.log.Info("rebuilt the core from Redis", "backends", l.backends, "running", len(l.tasks)-l.queued, "queued", l.queued)
	return l, nil
}

// readRedis reads the backend count, queue.executing and queue in one
// pipeline, then the fields of every task they name in another.
func (l *leader) readRedis(ctx context.Context) (*snapshotRedis, error) {
	k := l.s.keys
	pipe := l.s.rdb.Pipeline()
	nb := pipe.SCard(ctx, k.BackendSet())
	ex := pipe.HGetAll(ctx, k.Executing())
	q := pipe.ZRange(ctx, k.Queue(), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("rebuild: read the queue: %w", err)
	}
	snap := &snapshotRedis{backends: int(nb.Val()), executing: ex.Val(), queued: q.Val(), fields: map[string][]any{}}
	ids := slices.Concat(q.Val())
	for id := range snap.executing {
		ids = append(ids, id)
	}
	for len(ids) > 0 {
		n := min(len(ids), maxBatch)
		pipe := l.s.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, n)
		for i, id := range ids[:n] {
			cmds[i] = pipe.HMGet(ctx, k.Task(id), redisq.FieldDuration, redisq.FieldInteractive, redisq.FieldStarted)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("rebuild: read task hashes: %w", err)
		}
		for i, id := range ids[:n] {
			snap.fields[id] = cmds[i].Val()
		}
		ids = ids[n:]
	}
	return snap, nil
}

// field reads one HMGET value ("" when absent).
func field(f []any, i int) string {
	if i >= len(f) {
		return ""
	}
	s, _ := f[i].(string)
	return s
}

// adopt gives the core back a task that holds a slot.
func (l *leader) adopt(id, held string, f []any) {
	log := l.s.log.With("task", quoteID(id))
	duration, interactive, started := field(f, 0), field(f, 1) == "1", field(f, 2)
	if duration == "" && !interactive {
		log.Info("rebuild: running task's hash is gone; slot freed")
		l.ops = append(l.ops, op{kind: "drop", id: id})
		return
	}
	if l.backends == 0 {
		log.Info("rebuild: no live backend for a running task; ended")
		l.ops = append(l.ops, op{kind: "end", id: id, b: redisq.Control{Kind: redisq.ControlEnd, Text: asyqueue.BackendLostText}.String()})
		return
	}
	at := l.s.cfg.Now()
	if ms, err := strconv.ParseInt(started, 10, 64); err == nil {
		at = time.UnixMilli(ms)
	}
	a, err := l.adoptIn(id, held, duration, interactive, at)
	if err != nil {
		log.Warn("rebuild: cannot adopt a running task; left as it is", "held", held, "err", err)
		return
	}
	l.tasks[id] = &task{running: true, attempt: a.Attempt, tier: a.Tier, interactive: a.Interactive,
		class: l.classOf(duration, a.Interactive), startedAt: at}
}

func (l *leader) adoptIn(id, held, duration string, interactive bool, at time.Time) (sched.Assignment, error) {
	spec := sched.JobSpec{ID: id, Queue: asyqueue.QueueName}
	if interactive || held == "interactive" {
		return l.core.AdoptInteractive(spec, workerID, at)
	}
	tier, ok := l.tierOf(held)
	if !ok {
		return sched.Assignment{}, fmt.Errorf("queue.executing holds %q, not a tier's duration", held)
	}
	spec.Default = duration == "0"
	spec.Tier = tier
	return l.core.Adopt(spec, workerID, tier, at)
}

// requeue gives the core back a queued task.
func (l *leader) requeue(id string, f []any) {
	log := l.s.log.With("task", quoteID(id))
	duration, interactive := field(f, 0), field(f, 1) == "1"
	spec, ok := l.specOf(id, duration)
	switch {
	case l.tasks[id] != nil:
		log.Warn("rebuild: task both queued and running; kept running")
	case duration == "" && !interactive:
		log.Info("rebuild: queued task's hash is gone; dropped")
		l.ops = append(l.ops, op{kind: "drop", id: id})
	case interactive || !ok:
		log.Warn("rebuild: malformed queued task; dropped and denied", "duration", duration, "interactive", interactive)
		l.ops = append(l.ops, op{kind: "drop", id: id})
		l.deny(id, invalidText)
	default:
		if err := l.core.Submit(spec); err != nil {
			log.Warn("rebuild: the core refused a queued task; dropped", "err", err)
			l.ops = append(l.ops, op{kind: "drop", id: id})
			return
		}
		l.tasks[id] = &task{class: l.classOf(duration, false)}
		l.queued++
		l.fresh = true
	}
}
