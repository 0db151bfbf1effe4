package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/sched"
)

const (
	// workerID is the one push worker standing for all live backends.
	workerID = "backends"
	// maxBatch bounds the IDs one script takes or writes.
	maxBatch = 500
	// blockFor bounds one blocking wait of a watcher, so that it notices
	// the end of its leadership.
	blockFor = time.Second
)

// task is what the leader knows of a task the core holds.
type task struct {
	running     bool
	attempt     int
	tier        int
	interactive bool
	told        bool // an estimate was sent
	sent        sched.Estimate
	sentAt      time.Time
	class       string    // as the client chose: a tier's name, default or interactive
	startedAt   time.Time // when it left the queue
}

// leader is the state of a leadership: the core rebuilt from Redis and
// the decisions not yet written back. Only the Run goroutine touches it.
type leader struct {
	s        *Scheduler
	token    string
	core     *sched.Scheduler
	tasks    map[string]*task
	queued   int
	backends int
	ops      []op
	fresh    bool // the queue changed since the last estimates
	// estimatedAt is when the last estimate pass ran.
	estimatedAt time.Time
	valid       string // ",0,3000,…,": durations a task may name
	dashFailing bool   // the last dashboard could not be published
	// sampler builds the dashboard's history (nil until the first
	// dashboard of the leadership).
	sampler *dashboard.Sampler
}

// lead drives the core for one term, until ctx ends (keepLease ends it
// when the lease is lost) or a script is fenced. A Redis error in the
// middle of a step leaves the core unsure of what Redis holds, so it
// rebuilds the core from Redis while the term lasts.
func (s *Scheduler) lead(ctx context.Context, token string) error {
	for {
		l, err := s.rebuild(ctx, token)
		if err == nil {
			err = l.loop(ctx)
		}
		if ctx.Err() != nil || errors.Is(err, errFenced) {
			return err
		}
		level := slog.LevelError
		if redisq.Loading(err) { // Redis restarted and reads its data set back
			level = slog.LevelWarn
		}
		s.log.Log(ctx, level, "Redis step failed; rebuilding the core from Redis", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.cfg.RenewEvery):
		}
	}
}

func newLeader(s *Scheduler, token string) (*leader, error) {
	core, err := asyqueue.NewCore(s.cfg.Tiers, s.cfg.Now, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	if err != nil {
		return nil, fmt.Errorf("core: %w", err)
	}
	valid := ",0,"
	for _, t := range s.cfg.Tiers {
		valid += strconv.FormatInt(t.Duration.Milliseconds(), 10) + ","
	}
	return &leader{s: s, token: token, core: core, tasks: map[string]*task{}, valid: valid}, nil
}

// loop waits on the three lists and the timers, one step at a time, each
// followed by settle, until a step fails or ctx ends. The lease is not
// renewed here but beside (keepLease), so that slow steps cannot starve it.
func (l *leader) loop(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	lists := []string{l.s.keys.Incoming(), l.s.keys.Finished(), l.s.keys.BackendUpdated()}
	wake := make(chan int)
	acks := make([]chan time.Duration, len(lists))
	for i, key := range lists {
		acks[i] = make(chan time.Duration, 1)
		wg.Add(1)
		go func() { defer wg.Done(); l.watch(wctx, key, i, wake, acks[i]) }()
	}
	est, mon := time.NewTicker(l.s.cfg.EstimateEvery), time.NewTicker(l.s.cfg.MonitorEvery)
	dash := time.NewTicker(l.s.cfg.DashboardEvery)
	defer est.Stop()
	defer mon.Stop()
	defer dash.Stop()
	err := l.settle(ctx)
	if err == nil {
		err = l.publishDashboard(ctx)
	}
	for err == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case i := <-wake:
			var again time.Duration
			again, err = l.take(ctx, i)
			acks[i] <- again
		case <-est.C:
			err = l.tick(ctx)
		case <-mon.C:
			err = l.monitor(ctx)
		case <-dash.C:
			err = l.publishDashboard(ctx)
		case f := <-l.s.cmds:
			f(l)
		}
		if err == nil {
			err = l.settle(ctx)
		}
	}
	return err
}

// take empties list i (incoming, finished, updated) as far as one script
// goes. It returns how long its watcher should wait before looking again.
func (l *leader) take(ctx context.Context, i int) (time.Duration, error) {
	var err error
	switch i {
	case 0:
		err = l.takeIncoming(ctx)
	case 1:
		err = l.takeFinished(ctx)
	default:
		err = l.takeUpdated(ctx)
	}
	if errors.Is(err, errStale) {
		l.s.log.Warn("queue.incoming changed between reading and taking; retrying")
		return 10 * time.Millisecond, nil
	}
	return 0, err
}

// watch waits for elements in a list without taking them (BLMOVE from the
// list's right end to itself), wakes the main loop, and waits for it to
// have taken them.
func (l *leader) watch(ctx context.Context, key string, i int, wake chan<- int, ack <-chan time.Duration) {
	failing := false
	for ctx.Err() == nil {
		err := l.s.rdb.BLMove(ctx, key, key, "RIGHT", "RIGHT", blockFor).Err()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() == nil && !failing {
				l.s.log.Warn("cannot wait on "+key+"; retrying", "err", err)
			}
			failing = true
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		failing = false
		select {
		case wake <- i:
		case <-ctx.Done():
			return
		}
		select {
		case d := <-ack:
			sleep(ctx, d)
		case <-ctx.Done():
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// tick applies the passage of time and sends estimates.
func (l *leader) tick(ctx context.Context) error {
	l.core.Tick()
	if err := l.settle(ctx); err != nil {
		return err
	}
	return l.estimates(ctx)
}

// status describes the leader's state.
func (l *leader) status() Status {
	st := Status{Leading: true, Token: l.token, Core: l.core.Snapshot(), Running: map[string]string{},
		Invariants: l.core.CheckInvariants()}
	if es, err := l.core.Estimates(asyqueue.QueueName, l.queued); err == nil {
		for _, e := range es {
			st.Queued = append(st.Queued, e.JobID)
		}
	}
	for id, t := range l.tasks {
		switch {
		case t.interactive:
			st.Running[id] = "interactive"
		case t.running:
			st.Running[id] = l.s.cfg.Tiers[t.tier].Name
		}
	}
	return st
}

// tierOf maps a duration in ms to the tier of that duration.
func (l *leader) tierOf(ms string) (int, bool) {
	for k, t := range l.s.cfg.Tiers {
		if strconv.FormatInt(t.Duration.Milliseconds(), 10) == ms {
			return k, true
		}
	}
	return 0, false
}

// specOf builds the core's job from a task's duration field ("0": a
// default task).
func (l *leader) specOf(id, duration string) (sched.JobSpec, bool) {
	spec := sched.JobSpec{ID: id, Queue: asyqueue.QueueName}
	if duration == "0" {
		spec.Default = true
		return spec, true
	}
	k, ok := l.tierOf(duration)
	spec.Tier = k
	return spec, ok
}

// classOf names a task's class as its client chose it, from its task
// hash's duration field.
func (l *leader) classOf(duration string, interactive bool) string {
	switch {
	case interactive:
		return "interactive"
	case duration == "0":
		return "default"
	}
	if k, ok := l.tierOf(duration); ok {
		return l.s.cfg.Tiers[k].Name
	}
	return ""
}

// msOf is the duration of tier k in ms, as the task hash writes it.
func (l *leader) msOf(k int) string {
	return strconv.FormatInt(l.s.cfg.Tiers[k].Duration.Milliseconds(), 10)
}

// quoteID shows an ID from Redis safely in a log line.
func quoteID(id string) string {
	if len(id) > 64 {
		id = id[:64] + "…"
	}
	return strconv.Quote(strings.ToValidUTF8(id, "?"))
}
