package jobsrole

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/redisq/scheduler"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
)

// startNode runs a scheduler node as `usher scheduler` does: a scheduler
// whose terms run r's WhileLeading, and r serving /v1, until the test
// ends.
func startNode(t *testing.T, srv *redistest.Server, name string, logs *testbin.LogBuffer) {
	t.Helper()
	r, rdb, _, _ := newRole(t, srv, logs)
	r.cfg.PublishEvery = 500 * time.Millisecond // as deployed, not newRole's quick publishing
	s, err := scheduler.New(scheduler.Config{Client: rdb, Node: name, Tiers: asyqueue.Tiers(0, 0),
		Logger: slog.New(slog.NewTextHandler(logs, nil)), WhileLeading: r.WhileLeading, JobsStats: r.Stats})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = r.Serve(ctx); done <- struct{}{} }()
	go func() { _ = s.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
}

// epochOf reads the EPOCH of a token EPOCH:NODE.
func epochOf(token string) int {
	n, _ := strconv.Atoi(strings.SplitN(token, ":", 2)[0])
	return n
}

// The generic jobs' leader keeps leading and serving /v1 while Redis
// stalls, each stall shorter than the lease, back to back for longer than
// the lease, during an enqueue of many jobs: no 503, no new term, every
// enqueue answered. A stall longer than the lease then ends the term and
// another term leads, with every job acknowledged before: each is handed
// out exactly once.
func TestJobsLeaderServesThroughRedisStalls(t *testing.T) {
	srv := redistest.Start(t, redistest.DebugArgs...)
	ctx := t.Context()
	logs := &testbin.LogBuffer{}
	_, rdb, keys, _ := newRole(t, srv, nil)
	startNode(t, srv, "a", logs)
	startNode(t, srv, "b", logs)
	base, token := "", ""
	testwait.Eventually(t, 15*time.Second, func() bool {
		token, base = rdb.Get(ctx, keys.Leader()).Val(), rdb.Get(ctx, keys.SchedulerAPI()).Val()
		return base != "" && get(t, base+"/v1/queues") == http.StatusOK
	}, "a node serves /v1\nlogs:\n%s", logs)
	c := client.New(base, admin)
	if _, err := c.CreateQueue(ctx, client.QueueSpec{Name: "q"}); err != nil {
		t.Fatal(err)
	}

	// Enqueue and read /v1 all through the stalls.
	stop := make(chan struct{})
	var mu sync.Mutex
	var ids []string
	var failures []string
	var wg sync.WaitGroup
	wg.Go(func() {
		specs := make([]client.JobSpec, 200)
		for i := range specs {
			specs[i] = client.JobSpec{Queue: "q"}
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := c.Enqueue(ctx, specs...)
			mu.Lock()
			ids = append(ids, got...)
			if err != nil {
				failures = append(failures, "enqueue: "+err.Error())
			}
			mu.Unlock()
		}
	})
	wg.Go(func() { // what the queue servers read to pass /v1 on
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if v, err := rdb.Get(ctx, keys.SchedulerAPI()).Result(); err == nil && v != base || errors.Is(err, redis.Nil) {
				mu.Lock()
				failures = append(failures, "scheduler.api: "+strconv.Quote(v))
				mu.Unlock()
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if code := get(t, base+"/v1/queues"); code != http.StatusOK {
				mu.Lock()
				failures = append(failures, "GET /v1/queues: "+strconv.Itoa(code))
				mu.Unlock()
			}
		}
	})
	if err := srv.Stall(ctx, time.Second, 6*time.Second); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("during the stalls: %q\nlogs:\n%s", failures, logs)
	}
	if now := rdb.Get(ctx, keys.Leader()).Val(); now != token || strings.Contains(logs.String(), "stepped down") {
		t.Fatalf("the term changed during the stalls: %q, then %q\nlogs:\n%s", token, now, logs)
	}
	more, err := c.Enqueue(ctx, client.JobSpec{Queue: "q"})
	if err != nil {
		t.Fatalf("enqueue after the stalls: %v", err)
	}
	ids = append(ids, more...)
	if len(ids) < 2 {
		t.Fatalf("only %d jobs enqueued during the stalls", len(ids))
	}

	// A stall longer than the lease: another term leads, with every job.
	if err := srv.Stall(ctx, 5*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	var base2 string
	testwait.Eventually(t, 15*time.Second, func() bool {
		now := rdb.Get(ctx, keys.Leader()).Val()
		base2 = rdb.Get(ctx, keys.SchedulerAPI()).Val()
		return epochOf(now) > epochOf(token) && base2 != "" && get(t, base2+"/v1/queues") == http.StatusOK
	}, "a new term serves /v1\nlogs:\n%s", logs)
	if !strings.Contains(logs.String(), `reason="lost the lease: it lapsed`) {
		t.Fatalf("the old term did not end for a lapsed lease:\nlogs:\n%s", logs)
	}
	c = client.New(base2, admin)
	leased := map[string]int{}
	testwait.Eventually(t, 60*time.Second, func() bool {
		ans, err := c.Lease(ctx, client.LeaseRequest{Agent: "x", Slots: 1000, Max: 1000, WaitMs: 100})
		if err != nil {
			t.Fatalf("lease: %v", err)
		}
		var res []client.Result
		for _, j := range ans.Jobs {
			leased[j.ID]++
			res = append(res, client.Result{ID: j.ID, Attempt: j.Attempt})
		}
		if len(res) > 0 {
			if _, err := c.Complete(ctx, "x", res...); err != nil {
				t.Fatalf("complete: %v", err)
			}
		}
		return len(ans.Jobs) == 0 && len(leased) >= len(ids)
	}, "every job handed out")
	for _, id := range ids {
		if leased[id] != 1 {
			t.Fatalf("job %s handed out %d times (%d jobs enqueued, %d handed out)", id, leased[id], len(ids), len(leased))
		}
	}
	if len(leased) != len(ids) {
		t.Fatalf("%d jobs handed out, %d enqueued", len(leased), len(ids))
	}
}
