// Package jobstore keeps the generic jobs of internal/jobs on Redis, for
// multi-node mode: the leading scheduler runs the jobs engine over this
// store, and a standby that takes the lead rebuilds the engine from it.
// docs/redis.md ("Generic jobs") lists every key.
//
// One goroutine writes. Changes appended while a write is in flight wait
// in the next batch (group commit), and each batch is one Lua script that
// first checks the fence — that scheduler.leader still holds this
// store's token — and then applies every change of the batch, so that a
// scheduler that lost the lead cannot write anything.
package jobstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/redisq"
)

// ErrFenced reports that the store's token no longer holds the leader
// key: another scheduler leads, and this store writes nothing more.
var ErrFenced = errors.New("redis jobstore: fenced, another scheduler holds the lead")

// ErrClosed reports a change appended after Close.
var ErrClosed = errors.New("redis jobstore: closed")

// Fence is the lease every write checks: Key must hold Token. A zero
// Fence (empty Token) checks nothing, for tests and single-leader use.
type Fence struct {
	Key   string // the leader key; empty: keys.Leader()
	Token string
}

// maxScriptOps bounds the changes one script carries, so that a huge
// batch neither blocks Redis for long nor exceeds its argument limits;
// a larger batch is written as several scripts, in order.
const maxScriptOps = 10000

// Store is the Redis jobs.Store.
type Store struct {
	rdb   redis.UniversalClient
	k     names
	fence Fence
	log   *slog.Logger

	mu      sync.Mutex
	cur     *batch
	closed  bool
	failed  error // set once fenced: every later Append fails with it
	signal  chan struct{}
	stopped chan struct{}
}

// batch is the changes one write carries.
type batch struct {
	ops  []jobs.Op
	done chan struct{}
	err  error
}

// Wait implements jobs.Pending.
func (b *batch) Wait(ctx context.Context) error {
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newBatch() *batch { return &batch{done: make(chan struct{})} }

// New returns a store on rdb under keys' prefix whose writes check fence,
// and starts its writer. log may be nil.
func New(rdb redis.UniversalClient, keys redisq.Keys, fence Fence, log *slog.Logger) *Store {
	if fence.Key == "" {
		fence.Key = keys.Leader()
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Store{rdb: rdb, k: newNames(keys), fence: fence, log: log, cur: newBatch(),
		signal: make(chan struct{}, 1), stopped: make(chan struct{})}
	go s.write()
	return s
}

// Append implements jobs.Store.
func (s *Store) Append(ops ...jobs.Op) jobs.Pending {
	s.mu.Lock()
	switch {
	case s.failed != nil:
		err := s.failed
		s.mu.Unlock()
		return &batch{done: closedChan, err: err}
	case s.closed:
		s.mu.Unlock()
		return &batch{done: closedChan, err: ErrClosed}
	}
	b := s.cur
	b.ops = append(b.ops, ops...)
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
	return b
}

// write writes batches until the store closes.
func (s *Store) write() {
	defer close(s.stopped)
	for range s.signal {
		s.mu.Lock()
		b, closed, failed := s.cur, s.closed, s.failed
		s.cur = newBatch()
		s.mu.Unlock()
		if len(b.ops) > 0 {
			b.err = failed
			if b.err == nil {
				b.err = s.commit(context.Background(), b.ops)
			}
			s.noteFailure(b)
		}
		close(b.done)
		if closed {
			return
		}
	}
}

// noteFailure logs a failed batch and, when it was fenced, fails the store.
func (s *Store) noteFailure(b *batch) {
	if b.err == nil {
		return
	}
	if errors.Is(b.err, ErrFenced) {
		s.mu.Lock()
		if s.failed == nil {
			s.log.Error("redis jobstore: fenced; writing nothing more", "err", b.err)
		}
		s.failed = b.err
		s.mu.Unlock()
		return
	}
	s.log.Error("redis jobstore: write failed", "ops", len(b.ops), "err", b.err)
}

// commit writes ops in order: runs of changes in scripts of at most
// maxScriptOps changes, each prune on its own.
func (s *Store) commit(ctx context.Context, ops []jobs.Op) error {
	for len(ops) > 0 {
		if ops[0].Kind == jobs.OpPrune {
			if err := s.prune(ctx, ops[0].At); err != nil {
				return err
			}
			ops = ops[1:]
			continue
		}
		n := 0
		for n < len(ops) && n < maxScriptOps && ops[n].Kind != jobs.OpPrune {
			n++
		}
		if err := s.apply(ctx, ops[:n]); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// Close writes what was appended and stops the writer. It does not close
// the Redis client, which the caller owns.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	// A full buffer already wakes the writer (or woke it, and it saw
	// closed): a blocking send could wait for a writer that has returned.
	select {
	case s.signal <- struct{}{}:
	default:
	}
	<-s.stopped
	return nil
}

// Prune deletes, every interval until ctx ends, the jobs that finished
// longer than keep ago (up to 100,000 at a time), and the workflows left
// without jobs, as the SQLite store's Prune does.
func (s *Store) Prune(ctx context.Context, keep, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := s.Append(jobs.Op{Kind: jobs.OpPrune, At: time.Now().Add(-keep)}).Wait(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("redis jobstore: pruning finished jobs", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// fenceError turns a script's refusal into ErrFenced.
func fenceError(err error) error {
	if err == nil {
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) && len(re.Error()) >= 6 && re.Error()[:6] == "FENCED" {
		return fmt.Errorf("%w: %s", ErrFenced, re.Error())
	}
	return err
}
