package jobsrole

import (
	"context"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testwait"
)

// lead runs r's term as token until the test ends or the term is taken
// over, and waits until it serves /v1 at base.
func lead(t *testing.T, r *Role, token, base string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx) }()
	done := make(chan struct{})
	go func() { defer close(done); r.WhileLeading(ctx, token) }()
	testwait.Eventually(t, 10*time.Second, func() bool { return get(t, base+"/v1/queues") == 200 }, "%s serves /v1", base)
	return func() { cancel(); <-served; <-done }
}

// Scheduled jobs survive a change of leader in Redis: the new leader's
// engine shows them scheduled, hands out none early, and runs the one
// that comes due once.
func TestScheduledJobsSurviveAFailover(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	r1, rdb, keys, base1 := newRole(t, srv, nil)
	r2, _, _, base2 := newRole(t, srv, nil)
	rdb.Set(ctx, keys.Leader(), "1:a", 0)
	stop1 := lead(t, r1, "1:a", base1)
	c := client.New(base1, admin)
	if _, err := c.CreateQueue(ctx, client.QueueSpec{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	soon, later := time.Now().Add(1500*time.Millisecond), time.Now().Add(time.Hour)
	deadline := later.Add(time.Hour)
	ids, err := c.Enqueue(ctx, client.JobSpec{Queue: "q", RunAt: &soon}, client.JobSpec{Queue: "q", RunAt: &later, Deadline: &deadline})
	if err != nil {
		t.Fatal(err)
	}

	rdb.Set(ctx, keys.Leader(), "2:b", 0)
	stop1()
	defer lead(t, r2, "2:b", base2)()
	c = client.New(base2, admin)
	var got []client.LeasedJob
	for len(got) == 0 {
		ans, err := c.Lease(ctx, client.LeaseRequest{Agent: "x", Slots: 2, WaitMs: 5000})
		if err != nil {
			t.Fatal(err)
		}
		got = ans.Jobs
	}
	if len(got) != 1 || got[0].ID != ids[0] || time.Now().Before(soon) {
		t.Fatalf("leased %+v at %v; want only job %s, not before %v", got, time.Now(), ids[0], soon)
	}
	page, err := c.Jobs(ctx, client.JobFilter{State: client.StateScheduled})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != ids[1] || !page.Jobs[0].Deadline.Equal(deadline) {
		t.Fatalf("scheduled on the new leader: %+v, %v; want job %s with its deadline", page.Jobs, err, ids[1])
	}
}
