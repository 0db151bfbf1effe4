package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/sqlitejobs"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/jobtype"
)

// flakyDB is a fake database, named as such: the real ones (SQLite, Redis)
// cannot be made to fail a given write on demand here; the Redis store's
// retries against a real Redis that restarts are in the crash test
// (internal/jobs/crashtest, TestCrashRecoveryMultiNode). Its writes fail
// with errs[0], errs[1], … in turn, then succeed; it records the batches
// it was given and the ones it wrote.
type flakyDB struct {
	mu      sync.Mutex
	errs    []error
	tries   [][]int64 // the job ids of each batch it was given
	written [][]int64
}

func (f *flakyDB) commit(ops []jobs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []int64
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	f.tries = append(f.tries, ids)
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return err
	}
	f.written = append(f.written, ids)
	return nil
}

func (f *flakyDB) snapshot() (tries, written [][]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tries), slices.Clone(f.written)
}

var (
	errDown   = errors.New("connection refused")
	errFenced = errors.New("fenced")
)

func isFenced(err error) bool { return errors.Is(err, errFenced) }

// A write that fails for a while (a database restarting) is retried, the
// same batch again, until it is written; its waiter then sees success, and
// what was appended meanwhile is written after it, in order.
func TestFailedWriteIsRetriedUntilWritten(t *testing.T) {
	db := &flakyDB{errs: []error{errDown, errDown, errDown}}
	g := jobs.NewGroupCommitter("test", db.commit, isFenced, nil, nil)
	defer g.Close()
	first := g.Append(jobs.Op{Kind: jobs.OpStart, ID: 1})
	second := g.Append(jobs.Op{Kind: jobs.OpStart, ID: 2}) // may join the first batch
	for i, p := range []jobs.Pending{first, second} {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatalf("change %d: %v after the database came back", i+1, err)
		}
	}
	tries, written := db.snapshot()
	if got := slices.Concat(written...); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("written %v, want jobs 1 then 2, each once", written)
	}
	if len(tries) < 4 || !slices.Equal(tries[0], tries[1]) || !slices.Equal(tries[1], tries[2]) {
		t.Fatalf("tries %v: want the failed batch given again, unchanged, until written", tries)
	}
}

// A fatal failure (the store was fenced) is not retried: it fails its
// batch and every later Append at once, with ErrWritingEnded wrapping the
// store's error. Being fenced is how a term ends, so it is logged as a
// warning, not an error.
func TestFatalWriteFailureIsNotRetried(t *testing.T) {
	db := &flakyDB{errs: []error{errFenced}}
	var logs testbin.LogBuffer
	g := jobs.NewGroupCommitter("test", db.commit, isFenced, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	defer g.Close()
	for id := int64(1); id <= 2; id++ {
		err := g.Append(jobs.Op{Kind: jobs.OpStart, ID: id}).Wait(context.Background())
		if !errors.Is(err, errFenced) || !errors.Is(err, jobs.ErrWritingEnded) {
			t.Fatalf("write %d, the first fenced: %v; want the fenced error and ErrWritingEnded", id, err)
		}
	}
	if tries, _ := db.snapshot(); len(tries) != 1 {
		t.Fatalf("tries %v: a fenced write must not be retried, nor anything after it tried", tries)
	}
	if logs.Contains("level=ERROR") || !logs.Contains("level=WARN msg=\"test: writing nothing more\"") {
		t.Fatalf("log of a fenced store:\n%s\nwant one warning and no error", logs.String())
	}
}

// Close ends the retries of a database that stays down: the waiting
// batch fails with the database's error instead of Close hanging.
func TestCloseEndsRetries(t *testing.T) {
	down := make([]error, 1000)
	for i := range down {
		down[i] = errDown
	}
	db := &flakyDB{errs: down}
	g := jobs.NewGroupCommitter("test", db.commit, isFenced, nil, nil)
	p := g.Append(jobs.Op{Kind: jobs.OpStart, ID: 1})
	testwait.Eventually(t, 10*time.Second, func() bool {
		tries, _ := db.snapshot()
		return len(tries) >= 2
	}, "the committer retrying the write (a second try)")
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs while the database is down")
	}
	if err := p.Wait(context.Background()); !errors.Is(err, errDown) {
		t.Fatalf("the batch given up at Close: %v, want the database's error", err)
	}
	if _, written := db.snapshot(); len(written) != 0 {
		t.Fatalf("written %v while the database was down", written)
	}
}

// A store closed on the way out (a term's end, a shutdown) is no failure
// to look into: the engine's timed writes and the pruner that meet it log
// a warning, never an error.
func TestClosedStoreIsAWarning(t *testing.T) {
	ctx := context.Background()
	var logs testbin.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	db, err := sqlitedb.Open(ctx, filepath.Join(t.TempDir(), "usher.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := sqlitejobs.Open(ctx, db, log)
	if err != nil {
		t.Fatal(err)
	}
	e, err := jobs.Open(ctx, jobs.Config{Store: s, Logger: log, LeaseTTL: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Enqueue(ctx, []jobtype.JobSpec{{Queue: "q", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	// The lease lapses after the store closed: Run's write of its end fails.
	if a, err := e.Lease(ctx, jobtype.LeaseRequest{Agent: "a1", Slots: 1}); err != nil || len(a.Jobs) != 1 {
		t.Fatalf("lease: %v, %v", a, err)
	}
	s.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go e.Run(runCtx)
	go s.Prune(runCtx, time.Hour, time.Hour)
	testwait.Eventually(t, 10*time.Second, func() bool {
		return logs.Contains("writing expired leases") && logs.Contains("pruning finished jobs")
	}, "%s", "the timed write and the pruner meeting the closed store:\n"+logs.String())
	stop()
	if logs.Contains("level=ERROR") || !logs.Contains("level=WARN") {
		t.Fatalf("log after the store closed:\n%s\nwant warnings and no error", logs.String())
	}
}
