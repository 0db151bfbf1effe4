package client_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/testwait"
)

// startOrder runs jobs jobs of a strict queue (strictStart as given) with
// two Workers of two slots each racing for them, and returns the ids in
// the order the handlers began, and the ids in submission order.
func startOrder(t *testing.T, strictStart bool, jobs int) (started, want []string) {
	t.Helper()
	srv, c := setup(t)
	if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: "deploy", Order: "strict", StrictStart: strictStart}); err != nil {
		t.Fatal(err)
	}
	specs := make([]client.JobSpec, jobs)
	for i := range specs {
		specs[i] = client.JobSpec{Queue: "deploy"}
	}
	want = enqueue(t, c, specs...)
	var mu sync.Mutex
	handler := func(ctx context.Context, j *client.LeasedJob) (string, error) {
		mu.Lock()
		started = append(started, j.ID)
		mu.Unlock()
		return "", nil
	}
	var runs []*running
	for i := range 2 {
		w := &client.Worker{Client: client.New(srv.URL, srv.AdminToken), Agent: "racer-" + strconv.Itoa(i),
			Concurrency: 2, WaitMs: 5000, Handlers: map[string]client.Handler{"deploy": handler}}
		runs = append(runs, runWorker(t, w))
	}
	testwait.Eventually(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(started) == jobs
	}, "every job started")
	for _, r := range runs {
		r.stop()
		if err := r.wait(t); err != nil {
			t.Fatal(err)
		}
	}
	return started, want
}

// outOfOrder counts the jobs that began before one submitted earlier.
func outOfOrder(started, want []string) int {
	n := 0
	for i, id := range started {
		k := slices.Index(want, id)
		for _, later := range started[i+1:] {
			if slices.Index(want, later) < k {
				n++
				break
			}
		}
	}
	return n
}

// Strict start (docs/agents.md): two agents holding consecutive jobs of a
// strict-start queue cannot start them out of order — over many runs with
// real Workers racing on a real server, the handlers begin in id order.
// A plain strict queue hands the jobs out in order but lets the agents
// begin them in any; the test logs how often that happened.
func TestStrictStartKeepsTheStartOrderAcrossAgents(t *testing.T) {
	const runs, jobs = 6, 25
	plain := 0
	for run := range runs {
		started, want := startOrder(t, true, jobs)
		if !slices.Equal(started, want) {
			t.Fatalf("run %d: strict-start jobs began in the order %v; want %v", run, started, want)
		}
		plain += outOfOrder(startOrder(t, false, jobs))
	}
	t.Logf("plain strict queue: %d of %d jobs began before an earlier one", plain, runs*jobs)
}
