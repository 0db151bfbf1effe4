package jobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// waitStore is a Store whose appended changes never become durable: Wait
// ends with the caller's context, or with err when it is set (a store
// that failed).
type waitStore struct{ err error }

func (s waitStore) Load(context.Context) (*jobs.Snapshot, error) { return &jobs.Snapshot{}, nil }
func (s waitStore) Append(...jobs.Op) jobs.Pending               { return pending(s) }
func (s waitStore) Job(context.Context, int64) (jobtype.Job, error) {
	return jobtype.Job{}, &jobs.FieldError{Msg: "no job", Kind: jobs.ErrNotFound}
}
func (s waitStore) Jobs(context.Context, jobs.Filter) (jobs.Page, error) { return jobs.Page{}, nil }
func (s waitStore) WorkflowInfo(context.Context, int64) (string, error) {
	return "", &jobs.FieldError{Msg: "no workflow", Kind: jobs.ErrNotFound}
}
func (s waitStore) Close() error { return nil }

type pending waitStore

func (p pending) Wait(ctx context.Context) error {
	if p.err != nil {
		return p.err
	}
	<-ctx.Done()
	return ctx.Err()
}

// A caller that stops waiting for the store gets its context's error (the
// API then knows the client left and logs nothing); a store that fails
// gives ErrStore.
func TestWaitErrors(t *testing.T) {
	disk := errors.New("disk full")
	for _, tc := range []struct {
		name     string
		store    waitStore
		want     error
		notStore bool
	}{
		{"caller left", waitStore{}, context.Canceled, true},
		{"store failed", waitStore{err: disk}, jobs.ErrStore, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := jobs.Open(context.Background(), jobs.Config{Store: tc.store})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err = e.CreateQueue(ctx, jobtype.Queue{Name: "q"})
			if !errors.Is(err, tc.want) || (tc.notStore && errors.Is(err, jobs.ErrStore)) {
				t.Fatalf("CreateQueue = %v; want an error that is %v (and ErrStore: %v)", err, tc.want, !tc.notStore)
			}
		})
	}
}
