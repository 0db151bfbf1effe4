package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrStoreClosed reports a change appended after the store was closed.
var ErrStoreClosed = errors.New("store closed")

// writingOver reports an error that ends writing for good as planned: the
// term's end (a fenced store) or the store closed on the way out. It is a
// warning, not a failure to look into.
func writingOver(err error) bool {
	return errors.Is(err, ErrWritingEnded) || errors.Is(err, ErrStoreClosed)
}

// ErrWritingEnded reports changes a store will never write because a
// fatal failure ended its writing: the store was fenced, so another
// scheduler leads. That is how a term of leadership ends, not a fault;
// the error wraps the store's own.
var ErrWritingEnded = errors.New("store writing ended")

// GroupCommitter is the writing half a Store embeds: Append queues changes
// without blocking, and one goroutine hands everything appended since its
// last write to commit, in order, as one batch (changes appended while a
// write runs go into the next: group commit). A failure that fatal
// recognises (a fenced store) fails that batch and every later Append.
// Any other failure (a database that is down or restarting) is retried
// with backoff until the batch is written, a fatal failure, or Close:
// the engine already made the batch's changes in memory, and a later batch
// written without this one would leave the store saying something the
// engine never did. So commit must be safe to run again on a batch it
// wrote in part or in whole (a transaction, or writes that set values).
type GroupCommitter struct {
	name   string
	commit func([]Op) error
	fatal  func(error) bool
	log    *slog.Logger

	mu      sync.Mutex
	cur     *batch
	closed  bool
	failed  error
	signal  chan struct{}
	closing chan struct{} // closed by Close: stop retrying
	stopped chan struct{}
}

// Backoff of a failed write: the first wait, doubled up to the last.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 5 * time.Second
)

// batch is the changes one write carries.
type batch struct {
	ops  []Op
	done chan struct{}
	err  error
}

// Wait implements Pending.
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

// NewGroupCommitter starts the writer goroutine: commit writes one batch
// durably; fatal (nil: none) says which of its errors end all writing;
// stopped (nil: none) runs once the writer returned. name prefixes logs.
func NewGroupCommitter(name string, commit func([]Op) error, fatal func(error) bool, stopped func(), log *slog.Logger) *GroupCommitter {
	if log == nil {
		log = slog.Default()
	}
	if fatal == nil {
		fatal = func(error) bool { return false }
	}
	g := &GroupCommitter{name: name, commit: commit, fatal: fatal, log: log, cur: newBatch(),
		signal: make(chan struct{}, 1), closing: make(chan struct{}), stopped: make(chan struct{})}
	go g.write(stopped)
	return g
}

// Append queues changes to be written after every change appended before.
func (g *GroupCommitter) Append(ops ...Op) Pending {
	g.mu.Lock()
	switch {
	case g.failed != nil:
		err := g.failed
		g.mu.Unlock()
		return &batch{done: closedChan, err: err}
	case g.closed:
		g.mu.Unlock()
		return &batch{done: closedChan, err: ErrStoreClosed}
	}
	b := g.cur
	b.ops = append(b.ops, ops...)
	g.mu.Unlock()
	select {
	case g.signal <- struct{}{}:
	default:
	}
	return b
}

// write writes batches until the committer closes.
func (g *GroupCommitter) write(stopped func()) {
	defer close(g.stopped)
	if stopped != nil {
		defer stopped()
	}
	for range g.signal {
		g.mu.Lock()
		b, closed, failed := g.cur, g.closed, g.failed
		g.cur = newBatch()
		g.mu.Unlock()
		if len(b.ops) > 0 {
			b.err = failed
			if b.err == nil {
				b.err = g.commitRetrying(b.ops)
			}
			if b.err != nil && failed == nil && g.fatal(b.err) {
				b.err = fmt.Errorf("%w: %w", ErrWritingEnded, b.err)
			}
			g.noteFailure(b)
		}
		close(b.done)
		if closed {
			return
		}
	}
}

// commitRetrying writes ops, retrying a failure that is not fatal with
// backoff until it succeeds, fails fatally, or Close is called.
func (g *GroupCommitter) commitRetrying(ops []Op) error {
	wait := retryFirst
	for attempt := 1; ; attempt++ {
		err := g.commit(ops)
		if err == nil || g.fatal(err) {
			if err == nil && attempt > 1 {
				g.log.Info(g.name+": write succeeded after failures", "ops", len(ops), "attempts", attempt)
			}
			return err
		}
		g.log.Warn(g.name+": write failed; retrying", "ops", len(ops), "attempt", attempt, "in", wait, "err", err)
		retry := time.NewTimer(wait)
		select {
		case <-g.closing:
			retry.Stop()
			return err
		case <-retry.C:
		}
		wait = min(2*wait, retryMax)
	}
}

// noteFailure logs a failed batch and, when the failure is fatal, fails
// every later Append with it. A fatal failure is the end of a term (a
// fenced store), so it is logged as a warning.
func (g *GroupCommitter) noteFailure(b *batch) {
	if b.err == nil {
		return
	}
	if !errors.Is(b.err, ErrWritingEnded) {
		g.log.Error(g.name+": write failed", "ops", len(b.ops), "err", b.err)
		return
	}
	g.mu.Lock()
	if g.failed == nil {
		g.log.Warn(g.name+": writing nothing more", "err", b.err)
	}
	g.failed = b.err
	g.mu.Unlock()
}

// Close writes what was appended and stops the writer.
func (g *GroupCommitter) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	close(g.closing)
	g.mu.Unlock()
	// A full buffer already wakes the writer (or woke it, and it saw
	// closed): a blocking send could wait for a writer that has returned.
	select {
	case g.signal <- struct{}{}:
	default:
	}
	<-g.stopped
	return nil
}

// Prune deletes, every interval until ctx ends, the jobs that finished
// longer than keep ago (OpPrune), and the workflows left without jobs.
func (g *GroupCommitter) Prune(ctx context.Context, keep, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		switch err := g.Append(Op{Kind: OpPrune, At: time.Now().Add(-keep)}).Wait(ctx); {
		case err == nil || ctx.Err() != nil:
		case writingOver(err):
			g.log.Warn(g.name+": pruning finished jobs", "err", err)
		default:
			g.log.Error(g.name+": pruning finished jobs", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
