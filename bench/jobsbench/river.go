package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverSystem is riverqueue/river (riverpgxv5) on a PostgreSQL cluster the
// bench creates.
type riverSystem struct {
	pgBin       string
	pgSettings  []string
	batch       int // jobs per InsertManyFast
	enqueuers   int // concurrent InsertManyFast calls
	poolConns   int32
	fetchCool   time.Duration
	fetchPoll   time.Duration
	maxAttempts int
	clients     int           // river.Clients the workers are split over
	pollShort   time.Duration // the short FetchPollInterval the lateness is also measured with
	pollNext    time.Duration // FetchPollInterval of the next workers (0: fetchPoll)
	logger      *slog.Logger
	pg          *pgServer
	pool        *pgxpool.Pool
	inserter    *river.Client[pgx.Tx]   // inserts only (no queues)
	working     []*river.Client[pgx.Tx] // while workers run
	currentHook *hook
}

// noopArgs is the no-op job's arguments; Due, set for scheduled jobs,
// is their due time (payloadDue).
type noopArgs struct {
	Due string `json:"due,omitempty"`
}

func (noopArgs) Kind() string { return "noop" }

// noopWorker runs the no-op job, reporting to the system's current hook.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	s *riverSystem
}

func (w *noopWorker) Work(_ context.Context, j *river.Job[noopArgs]) error {
	h := w.s.currentHook
	h.beginJob(j.Args.Due)
	h.end()
	return nil
}

func (r *riverSystem) workers() *river.Workers {
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{s: r})
	return ws
}

func (r *riverSystem) setup(ctx context.Context, dir string) error {
	var err error
	if r.pg, err = startPostgres(ctx, dir, r.pgBin, r.pgSettings); err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(r.pg.url)
	if err != nil {
		return err
	}
	cfg.MaxConns = r.poolConns
	if r.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return err
	}
	driver := riverpgxv5.New(r.pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: r.logger})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	r.inserter, err = river.NewClient(driver, &river.Config{Workers: r.workers(), Logger: r.logger})
	return err
}

func (r *riverSystem) reset(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, "TRUNCATE river_job")
	return err
}

func (r *riverSystem) client() *river.Client[pgx.Tx] {
	if len(r.working) > 0 {
		return r.working[0]
	}
	return r.inserter
}

func (r *riverSystem) params(n int) []river.InsertManyParams {
	p := make([]river.InsertManyParams, n)
	for i := range p {
		p[i] = river.InsertManyParams{Args: noopArgs{}, InsertOpts: &river.InsertOpts{MaxAttempts: r.maxAttempts}}
	}
	return p
}

// enqueue uses InsertManyFast (COPY FROM) in batches.
func (r *riverSystem) enqueue(ctx context.Context, n int) error {
	c := r.client()
	return enqueueBatches(ctx, n, r.batch, r.enqueuers, func(ctx context.Context, size int) error {
		got, err := c.InsertManyFast(ctx, r.params(size))
		if err == nil && got != size {
			err = fmt.Errorf("InsertManyFast inserted %d of %d", got, size)
		}
		return err
	})
}

func (r *riverSystem) enqueueOne(ctx context.Context) error {
	_, err := r.client().Insert(ctx, noopArgs{}, &river.InsertOpts{MaxAttempts: r.maxAttempts})
	return err
}

// startWorkers starts r.clients river.Clients sharing the concurrency
// (MaxWorkers of the one queue).
func (r *riverSystem) startWorkers(ctx context.Context, concurrency int, h *hook) error {
	r.currentHook = h
	n := max(1, min(r.clients, concurrency))
	for i := range n {
		c := concurrency / n
		if i < concurrency%n {
			c++
		}
		poll := cmp.Or(r.pollNext, r.fetchPoll)
		client, err := river.NewClient(riverpgxv5.New(r.pool), &river.Config{
			Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c}},
			Workers:           r.workers(),
			FetchCooldown:     min(r.fetchCool, poll), // River wants it no longer than the poll interval
			FetchPollInterval: poll,
			Logger:            r.logger,
		})
		if err != nil {
			return err
		}
		if err := client.Start(ctx); err != nil {
			return err
		}
		r.working = append(r.working, client)
	}
	return nil
}

func (r *riverSystem) stopWorkers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var first error
	for _, c := range r.working {
		if err := c.Stop(ctx); err != nil && first == nil {
			first = err
		}
	}
	r.working = nil
	return first
}

// unfinished counts jobs in the states before completion (an index scan:
// River keeps completed jobs for a day).
func (r *riverSystem) unfinished(ctx context.Context) (int, error) {
	var n int
	err := r.pool.QueryRow(ctx, `SELECT count(*) FROM river_job
		WHERE state IN ('available', 'pending', 'running', 'retryable', 'scheduled')`).Scan(&n)
	return n, err
}

func (r *riverSystem) describe() description {
	d := description{
		Version: fmt.Sprintf("riverqueue/river %s, riverpgxv5 %s, pgx %s", moduleVersion("github.com/riverqueue/river"),
			moduleVersion("github.com/riverqueue/river/riverdriver/riverpgxv5"), moduleVersion("github.com/jackc/pgx/v5")),
		Durability: "PostgreSQL " + pgDurability(r.pgSettings),
		Tuning: fmt.Sprintf("bulk enqueue: InsertManyFast, batches of %d, %d at once; workers: %d river.Client(s) in the bench process, FetchCooldown %s, FetchPollInterval %s; pgxpool MaxConns %d",
			r.batch, r.enqueuers, r.clients, r.fetchCool, r.fetchPoll, r.poolConns),
	}
	if r.pg != nil {
		d.Server = "PostgreSQL " + r.pg.version
	}
	return d
}

// pgDurability names the settings that decide durability.
func pgDurability(settings []string) string {
	vals := map[string]string{"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
	for _, s := range settings {
		if k, v, ok := strings.Cut(s, "="); ok {
			vals[k] = v
		}
	}
	return fmt.Sprintf("fsync=%s, synchronous_commit=%s, full_page_writes=%s", vals["fsync"], vals["synchronous_commit"], vals["full_page_writes"])
}

func (r *riverSystem) close() {
	_ = r.stopWorkers(context.Background())
	if r.pool != nil {
		r.pool.Close()
	}
	r.pg.stop()
}

// quietLogger logs warnings and errors to stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// enqueueScheduled uses InsertManyFast with ScheduledAt, in batches.
func (r *riverSystem) enqueueScheduled(ctx context.Context, n int, due func(int) time.Time) error {
	c := r.client()
	var mu sync.Mutex
	i := 0
	return enqueueBatches(ctx, n, r.batch, r.enqueuers, func(ctx context.Context, size int) error {
		p := make([]river.InsertManyParams, size)
		mu.Lock()
		for k := range p {
			d := due(i)
			i++
			p[k] = river.InsertManyParams{Args: noopArgs{Due: payloadDue(d)},
				InsertOpts: &river.InsertOpts{MaxAttempts: r.maxAttempts, ScheduledAt: d}}
		}
		mu.Unlock()
		got, err := c.InsertManyFast(ctx, p)
		if err == nil && got != size {
			err = fmt.Errorf("InsertManyFast inserted %d of %d", got, size)
		}
		return err
	})
}

// variants: River's scheduler runs every 5 s (not settable in v0.51) and
// makes available the jobs due before its next run; a job then waits for
// a fetch, which no notification wakes for a job due in the future, so
// FetchPollInterval bounds the lateness: the bench's, then a short one.
func (r *riverSystem) variants() []variant {
	return []variant{
		{Name: "scheduler every 5s, FetchPollInterval " + r.fetchPoll.String(), Interval: r.fetchPoll},
		{Name: "scheduler every 5s, FetchPollInterval " + r.pollShort.String(), Interval: r.pollShort},
	}
}

func (r *riverSystem) useVariant(v variant) { r.pollNext = v.Interval }

func (r *riverSystem) earlyAllowance() time.Duration { return 0 }
