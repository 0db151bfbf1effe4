// Package scheduler is the scheduler role of usher's Redis mode
// (docs/redis.md, "Scheduler"): every node campaigns for a fenced lease in
// scheduler.leader; the leader rebuilds the scheduling core from Redis and
// drives it from queue.incoming, queue.finished and backend.updated, writing
// its decisions back through fenced scripts; the others stand by.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// invalidText is the denial of a task whose options the scheduler cannot
// read; the queue protocol's other texts are asyqueue's.
const invalidText = "invalid task: its duration is not one of the scheduler's tiers"

// Config sets up a Scheduler. Zero durations take the defaults of
// docs/redis.md.
type Config struct {
	// Client is the Redis connection (redisq.Open); required.
	Client redis.UniversalClient
	// Prefix is prepended to every key (redisq.DefaultPrefix when empty).
	Prefix string
	// Node names this scheduler in its token (hostname-pid when empty).
	Node string
	// Tiers are the duration tiers (sched.DefaultTiers when empty).
	Tiers []sched.Tier
	// Logger receives what happens (slog.Default when nil).
	Logger *slog.Logger
	// LeaseTTL is the lease's life (3 s); RenewEvery how often the leader
	// renews it and a standby tries to take it (500 ms).
	LeaseTTL   time.Duration
	RenewEvery time.Duration
	// EstimateEvery is how often queued tasks' estimates are computed (1 s);
	// EstimateResend the longest a queued task goes without one (5 s).
	EstimateEvery  time.Duration
	EstimateResend time.Duration
	// MonitorEvery is how often the leader looks for lost work (5 s);
	// PendingIdle how long a queue.outcoming entry may stay read but not
	// taken before its task is aborted (10 s).
	MonitorEvery time.Duration
	PendingIdle  time.Duration
	// DashboardEvery is how often the leader writes the deployment's
	// dashboard to scheduler.dashboard (1 s); the key lives DashboardTTL
	// (redisq.DashboardTTL, 5 s) unless written again.
	DashboardEvery time.Duration
	DashboardTTL   time.Duration
	// JobsStats, when set, gives the generic jobs' state for the dashboard:
	// that of the engine the leader runs this term (jobsrole.Role.Stats);
	// false while there is none.
	JobsStats func() (jobtype.Stats, bool)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// WhileLeading, when set, runs on a goroutine of its own for as long as
	// this node leads, with the lease's token; its context ends when the
	// node steps down, and the next term waits until it returned. The
	// generic jobs of /v1 run there (docs/redis.md, "Generic jobs").
	WhileLeading func(ctx context.Context, token string)
}

func (c *Config) setDefaults() {
	if c.Prefix == "" {
		c.Prefix = redisq.DefaultPrefix
	}
	if c.Node == "" {
		c.Node = redisq.DefaultNode()
	}
	if len(c.Tiers) == 0 {
		c.Tiers = sched.DefaultTiers()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	setDur(&c.LeaseTTL, 3*time.Second)
	setDur(&c.RenewEvery, 500*time.Millisecond)
	setDur(&c.EstimateEvery, time.Second)
	setDur(&c.EstimateResend, 5*time.Second)
	setDur(&c.MonitorEvery, 5*time.Second)
	setDur(&c.PendingIdle, 10*time.Second)
	setDur(&c.DashboardEvery, time.Second)
	setDur(&c.DashboardTTL, redisq.DashboardTTL)
	if c.Now == nil {
		c.Now = time.Now
	}
}

func setDur(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Scheduler is one scheduler node: a standby or the leader.
type Scheduler struct {
	cfg  Config
	rdb  redis.UniversalClient
	keys redisq.Keys
	log  *slog.Logger
	// cmds run on the Run goroutine with the leader's state (nil while
	// standing by): status queries and tests.
	cmds chan func(*leader)

	// What the dashboard shows of the past, kept across terms and rebuilds;
	// only the Run goroutine touches them.
	recent asyqueue.RecentEvents // downgrades, halts and denials decided here
	ended  asyqueue.Throughput   // tasks that ended

	leading atomic.Bool // between taking the lease and stepping down

	mu    sync.Mutex
	token string // the token of the lease last held, for Resign
}

// New checks the configuration and returns a Scheduler; call Run.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil {
		return nil, errors.New("scheduler: a Redis client is required")
	}
	cfg.setDefaults()
	if _, err := sched.New(sched.Config{Tiers: cfg.Tiers, Now: cfg.Now}); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return &Scheduler{cfg: cfg, rdb: cfg.Client, keys: redisq.NewKeys(cfg.Prefix),
		log: cfg.Logger.With("node", cfg.Node), cmds: make(chan func(*leader))}, nil
}

// Run campaigns for the lead, leads while it holds it and campaigns again
// when it loses it, until ctx ends. It does not give the lease up when ctx
// ends (a crash looks the same to the others); call Resign for that.
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		token, acquired, err := s.campaign(ctx)
		if err != nil {
			return nil // ctx ended
		}
		s.mu.Lock()
		s.token = token
		s.mu.Unlock()
		s.log.Info("leading", "token", token)
		s.leading.Store(true)
		err = s.term(ctx, token, acquired)
		s.leading.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("stepped down", "token", token, "reason", err)
	}
}

// term is one leadership: keepLease keeps the lease, lead drives the core
// and cfg.WhileLeading runs beside, all under one context that ends when
// the first of them ends it (the lease lost, a fenced script) or ctx ends.
// The next term waits until all three returned. It returns why the term
// ended.
func (s *Scheduler) term(ctx context.Context, token string, acquired time.Time) error {
	term, end := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { end(s.keepLease(term, token, acquired)) })
	if s.cfg.WhileLeading != nil {
		wg.Go(func() { s.cfg.WhileLeading(term, token) })
	}
	end(s.lead(term, token))
	wg.Wait()
	return context.Cause(term)
}

// Resign gives up the lease this node holds, if it still does, so that a
// standby takes over at once. Call it after Run returned.
func (s *Scheduler) Resign(ctx context.Context) error {
	s.mu.Lock()
	token := s.token
	s.mu.Unlock()
	if token == "" {
		return nil
	}
	if err := resignScript.Run(ctx, s.rdb, []string{s.keys.Leader()}, token).Err(); err != nil {
		return fmt.Errorf("scheduler: resign: %w", err)
	}
	return nil
}

// Status is what a node knows: whether it leads and, if so, its core.
type Status struct {
	Leading bool
	Token   string
	// Core is the scheduling core's snapshot (leader only).
	Core sched.Snapshot
	// Queued lists the queued task IDs in queue order; Running maps each
	// task holding a slot to its tier's name ("interactive" for those).
	Queued  []string
	Running map[string]string
	// Invariants is the core's CheckInvariants (a full recount: for tests
	// and diagnostics).
	Invariants error
}

// Status asks the Run goroutine for the node's state.
func (s *Scheduler) Status(ctx context.Context) (Status, error) {
	var st Status
	err := s.do(ctx, func(l *leader) {
		if l != nil {
			st = l.status()
		}
	})
	return st, err
}

// Leading says whether this node leads now.
func (s *Scheduler) Leading() bool { return s.leading.Load() }

// ErrNotLeading is CoreSnapshot's answer on a node that stands by.
var ErrNotLeading = errors.New("scheduler: this node does not lead")

// CoreSnapshot returns the leader's scheduling core's snapshot (for
// metrics), or ErrNotLeading.
func (s *Scheduler) CoreSnapshot(ctx context.Context) (sched.Snapshot, error) {
	var snap sched.Snapshot
	leading := false
	err := s.do(ctx, func(l *leader) {
		if l != nil {
			snap, leading = l.core.Snapshot(), true
		}
	})
	if err == nil && !leading {
		err = ErrNotLeading
	}
	return snap, err
}

// do runs f on the Run goroutine and waits for it.
func (s *Scheduler) do(ctx context.Context, f func(*leader)) error {
	done := make(chan struct{})
	select {
	case s.cmds <- func(l *leader) { f(l); close(done) }:
	case <-ctx.Done():
		return fmt.Errorf("scheduler: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("scheduler: %w", ctx.Err())
	}
}

// campaign tries to take the lease every RenewEvery until it does or ctx
// ends, answering commands as a standby meanwhile. It returns the token
// and when the script that took the lease was sent.
func (s *Scheduler) campaign(ctx context.Context) (string, time.Time, error) {
	t := time.NewTicker(s.cfg.RenewEvery)
	defer t.Stop()
	failing := false
	for {
		at := time.Now()
		token, err := s.tryAcquire(ctx)
		switch {
		case err != nil && !failing:
			s.log.Warn("cannot reach Redis to campaign; retrying", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
		if token != "" {
			return token, at, nil
		}
		select {
		case <-ctx.Done():
			return "", time.Time{}, ctx.Err()
		case f := <-s.cmds:
			f(nil)
		case <-t.C:
		}
	}
}

func (s *Scheduler) tryAcquire(ctx context.Context) (string, error) {
	v, err := acquireScript.Run(ctx, s.rdb, []string{s.keys.Leader(), s.keys.Epoch()},
		s.cfg.Node, s.cfg.LeaseTTL.Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("acquire lease: %w", err)
	}
	return v, nil
}
