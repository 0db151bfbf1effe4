package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// heldStore is a fake Store, named as such: a real database cannot be made
// to hold one write on demand. Its writes wait while the gate is shut
// (as a database that is restarting, whose writes the store retries),
// and it keeps nothing: reads find nothing.
type heldStore struct {
	waitStore
	*jobs.GroupCommitter
	gate chan chan struct{} // holds the channel the current writes wait on
}

func newHeldStore() *heldStore {
	s := &heldStore{gate: make(chan chan struct{}, 1)}
	open := make(chan struct{})
	close(open)
	s.gate <- open
	s.GroupCommitter = jobs.NewGroupCommitter("held", func([]jobs.Op) error {
		g := <-s.gate
		s.gate <- g
		<-g
		return nil
	}, nil, nil, nil)
	return s
}

// shut makes later writes wait; the returned func lets them through.
func (s *heldStore) shut() (open func()) {
	g := make(chan struct{})
	<-s.gate
	s.gate <- g
	return func() { close(g) }
}

func (s *heldStore) Load(context.Context) (*jobs.Snapshot, error) {
	return &jobs.Snapshot{NextJob: 1, NextWorkflow: 1}, nil
}
func (s *heldStore) Append(ops ...jobs.Op) jobs.Pending { return s.GroupCommitter.Append(ops...) }
func (s *heldStore) Close() error                       { return s.GroupCommitter.Close() }

// A lease whose answer never leaves the server (the agent gave up while
// the store was slow to make the lease durable) hands its jobs back: the
// next agent to ask gets them, on the same attempt, instead of the jobs
// staying "running" on an agent that never heard of them.
func TestLeaseAnswerNeverSentHandsTheJobsBack(t *testing.T) {
	store := newHeldStore()
	e, err := jobs.Open(context.Background(), jobs.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	if _, err := e.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true}); err != nil {
		t.Fatal(err)
	}
	ids, err := e.Enqueue(ctx, []jobtype.JobSpec{{Queue: "q", Payload: []byte(`"x"`)}})
	if err != nil {
		t.Fatal(err)
	}

	open := store.shut()
	gaveUp, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = e.Lease(gaveUp, jobtype.LeaseRequest{Agent: "a", Slots: 1, Max: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lease while the store holds its write: %v, want the agent's deadline", err)
	}
	open()

	ans, err := e.Lease(ctx, jobtype.LeaseRequest{Agent: "b", Slots: 1, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Jobs) != 1 || ans.Jobs[0].ID != ids[0] || ans.Jobs[0].Attempt != 1 {
		t.Fatalf("the next agent got %+v; want job %s, attempt 1", ans.Jobs, ids[0])
	}
}
