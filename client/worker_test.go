package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
)

// setup starts a server with the given queues and returns an admin client.
func setup(t *testing.T, queues ...string) (*jobsapitest.Server, *client.Client) {
	t.Helper()
	srv := jobsapitest.Start(t)
	c := client.New(srv.URL, srv.AdminToken)
	for _, q := range queues {
		if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: q}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, c
}

func enqueue(t *testing.T, c *client.Client, specs ...client.JobSpec) []string {
	t.Helper()
	ids, err := c.Enqueue(t.Context(), specs...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// waitJob polls the server until the job satisfies ok, and returns it.
func waitJob(t *testing.T, c *client.Client, id string, ok func(client.Job) bool) client.Job {
	t.Helper()
	var j client.Job
	there := func() bool {
		var err error
		if j, err = c.Job(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return ok(j)
	}
	if err := testwait.Until(30*time.Second, there, "job %s in the state the test waits for", id); err != nil {
		t.Fatalf("%v: %+v", err, j)
	}
	return j
}

func finished(j client.Job) bool { return j.Finished() }

// running is a Worker.Run going on in the background.
type running struct {
	stop context.CancelFunc
	done chan struct{}
	err  error
}

// returned reports whether Run returned already.
func (r *running) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait waits for Run to return and gives its error.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	testwait.Receive(t, 30*time.Second, r.done, "Worker.Run returning")
	return r.err
}

// runWorker runs w until the test stops it; at the test's end it is
// aborted if it still runs.
func runWorker(t *testing.T, w *client.Worker) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		w.Abort()
		testwait.Receive(t, 30*time.Second, r.done, "Worker.Run returning after Abort")
	})
	return r
}

// exitCoder is an error with its own exit code.
type exitCoder struct{ code int }

func (e exitCoder) Error() string { return fmt.Sprintf("exit status %d", e.code) }
func (e exitCoder) ExitCode() int { return e.code }

// Jobs of two queues run at the same time (each handler waits until the
// other queue's has started), and every outcome is reported as it should:
// output, handler error with exit code 1, an error's own exit code, a panic.
func TestWorkerRunsQueuesConcurrently(t *testing.T) {
	_, c := setup(t, "a", "b", "fail", "code", "panic")
	started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	meet := func(self, other string) client.Handler {
		return func(ctx context.Context, job *client.LeasedJob) (string, error) {
			close(started[self])
			select {
			case <-started[other]:
			case <-ctx.Done():
				return "", fmt.Errorf("%s never saw %s start: %w", self, other, ctx.Err())
			}
			return self + ":" + string(job.Payload), nil
		}
	}
	w := &client.Worker{Client: c, Agent: "w1", Concurrency: 5, WaitMs: 1000, Handlers: map[string]client.Handler{
		"a":    meet("a", "b"),
		"b":    meet("b", "a"),
		"fail": func(context.Context, *client.LeasedJob) (string, error) { return "partial", errors.New("boom") },
		"code": func(context.Context, *client.LeasedJob) (string, error) { return "", exitCoder{7} },
		"panic": func(context.Context, *client.LeasedJob) (string, error) {
			panic("oops")
		},
	}}
	tests := []struct {
		queue, output, errText string
		exit                   int
	}{
		{"a", `a:"x"`, "", 0},
		{"b", `b:"x"`, "", 0},
		{"fail", "partial", "boom", 1},
		{"code", "", "exit status 7", 7},
		{"panic", "", "handler panicked: oops", 1},
	}
	var specs []client.JobSpec
	for _, tt := range tests {
		specs = append(specs, client.JobSpec{Queue: tt.queue, Payload: json.RawMessage(`"x"`), TimeoutMs: 20000})
	}
	ids := enqueue(t, c, specs...)
	runWorker(t, w)
	for i, tt := range tests {
		j := waitJob(t, c, ids[i], finished)
		wantState := client.StateSucceeded
		if tt.exit != 0 {
			wantState = client.StateFailed
		}
		if j.State != wantState || j.Output != tt.output || j.Error != tt.errText || j.ExitCode == nil ||
			*j.ExitCode != tt.exit || j.Agent != "w1" {
			t.Errorf("queue %s: job %+v (exit %v), want %s output %q error %q exit %d", tt.queue, j,
				exitOf(j), wantState, tt.output, tt.errText, tt.exit)
		}
	}
}

func exitOf(j client.Job) any {
	if j.ExitCode == nil {
		return nil
	}
	return *j.ExitCode
}

// A graceful stop lets the running job finish and reports it, fetches no
// more work, and leaves (the agent is gone from the stats).
func TestWorkerGracefulStop(t *testing.T) {
	_, c := setup(t, "q")
	started, release := make(chan struct{}), make(chan struct{})
	w := &client.Worker{Client: c, Agent: "w-stop", WaitMs: 1000, Handlers: map[string]client.Handler{
		"q": func(ctx context.Context, job *client.LeasedJob) (string, error) {
			close(started)
			<-release
			return "finished after the stop", ctx.Err()
		},
	}}
	first := enqueue(t, c, client.JobSpec{Queue: "q"})[0]
	run := runWorker(t, w)
	testwait.Receive(t, 30*time.Second, started, "the handler starting the job")
	run.stop()
	second := enqueue(t, c, client.JobSpec{Queue: "q"})[0]
	if run.returned() {
		t.Fatalf("Run returned before its running job finished: %v", run.err)
	}
	close(release)
	if err := run.wait(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	j, err := c.Job(t.Context(), first)
	if err != nil || j.State != client.StateSucceeded || j.Output != "finished after the stop" {
		t.Fatalf("running job after a graceful stop: %+v, %v", j, err)
	}
	if j, err := c.Job(t.Context(), second); err != nil || j.State != client.StateQueued {
		t.Fatalf("job enqueued after the stop: %+v, %v (want queued: no fetching after a stop)", j, err)
	}
	s, err := c.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range s.Agents {
		if a.ID == "w-stop" {
			t.Fatalf("the worker did not leave: %+v", s.Agents)
		}
	}
}

// Abort ends the running handlers' contexts at once with ErrAborted and
// reports their jobs failed; Run returns.
func TestWorkerAbort(t *testing.T) {
	_, c := setup(t, "q")
	var inHandler sync.WaitGroup
	inHandler.Add(2)
	causes := make(chan error, 2)
	w := &client.Worker{Client: c, Concurrency: 2, WaitMs: 1000, Handlers: map[string]client.Handler{
		"q": func(ctx context.Context, job *client.LeasedJob) (string, error) {
			inHandler.Done()
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return "", ctx.Err()
		},
	}}
	ids := enqueue(t, c, client.JobSpec{Queue: "q", TimeoutMs: 50000}, client.JobSpec{Queue: "q", TimeoutMs: 50000})
	run := runWorker(t, w)
	inHandler.Wait()
	w.Abort()
	if err := run.wait(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	for range 2 {
		if cause := testwait.Receive(t, 30*time.Second, causes, "a handler's context ending"); !errors.Is(cause, client.ErrAborted) {
			t.Fatalf("handler's cause = %v, want ErrAborted", cause)
		}
	}
	for _, id := range ids {
		if j, err := c.Job(t.Context(), id); err != nil || j.State != client.StateFailed || !strings.Contains(j.Error, "aborted") {
			t.Fatalf("aborted job: %+v, %v", j, err)
		}
	}
}

// A handler that ignores its context past the job's time limit is
// abandoned after the grace and its job reported failed; the worker goes on
// with the next job.
func TestWorkerAbandonsHandlerPastTimeout(t *testing.T) {
	_, c := setup(t, "stuck", "ok")
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) })
	w := &client.Worker{Client: c, WaitMs: 1000, Grace: 50 * time.Millisecond, Handlers: map[string]client.Handler{
		"stuck": func(context.Context, *client.LeasedJob) (string, error) {
			<-unblock // ignores ctx
			return "too late", nil
		},
		"ok": func(context.Context, *client.LeasedJob) (string, error) { return "next", nil },
	}}
	ids := enqueue(t, c, client.JobSpec{Queue: "stuck", TimeoutMs: 150})
	runWorker(t, w)
	j := waitJob(t, c, ids[0], finished)
	if j.State != client.StateFailed || !strings.Contains(j.Error, "time limit (150ms)") || !strings.Contains(j.Error, "abandoned") {
		t.Fatalf("stuck job: %+v", j)
	}
	next := enqueue(t, c, client.JobSpec{Queue: "ok"})[0]
	if j := waitJob(t, c, next, finished); j.State != client.StateSucceeded || j.Output != "next" {
		t.Fatalf("job after the abandoned one: %+v", j)
	}
}

// A handler that honours its context at the time limit gets ErrJobTimeout
// as the cause, and the job fails with the limit in its error.
func TestWorkerTimeout(t *testing.T) {
	_, c := setup(t, "q")
	causes := make(chan error, 1)
	w := &client.Worker{Client: c, WaitMs: 1000, Handlers: map[string]client.Handler{
		"q": func(ctx context.Context, _ *client.LeasedJob) (string, error) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return "some output", ctx.Err()
		},
	}}
	id := enqueue(t, c, client.JobSpec{Queue: "q", TimeoutMs: 100})[0]
	runWorker(t, w)
	j := waitJob(t, c, id, finished)
	if cause := testwait.Receive(t, 30*time.Second, causes, "the handler's context ending"); !errors.Is(cause, client.ErrJobTimeout) {
		t.Fatalf("cause = %v", cause)
	}
	if j.State != client.StateFailed || j.Error != "job ran past its time limit (100ms)" || j.Output != "some output" {
		t.Fatalf("timed-out job: %+v", j)
	}
}

// Cancelling a running job through the API stops its handler at the
// worker's next renewal, with ErrJobStopped as the cause.
func TestWorkerStopsCancelledJob(t *testing.T) {
	_, c := setup(t, "q")
	started, causes := make(chan struct{}), make(chan error, 1)
	w := &client.Worker{Client: c, WaitMs: 1000, RenewInterval: 20 * time.Millisecond, Handlers: map[string]client.Handler{
		"q": func(ctx context.Context, _ *client.LeasedJob) (string, error) {
			close(started)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return "", ctx.Err()
		},
	}}
	id := enqueue(t, c, client.JobSpec{Queue: "q", TimeoutMs: 50000})[0]
	runWorker(t, w)
	testwait.Receive(t, 30*time.Second, started, "the handler starting the job")
	if _, err := c.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, client.ErrJobStopped) {
			t.Fatalf("cause = %v, want ErrJobStopped", cause)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled job's handler was never stopped")
	}
	if j, err := c.Job(t.Context(), id); err != nil || j.State != client.StateCancelled {
		t.Fatalf("cancelled job: %+v, %v", j, err)
	}
}

// countingTransport counts the requests to one path on their way to the
// real server.
type countingTransport struct {
	path string
	n    atomic.Int32
}

func (ct *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == ct.path {
		ct.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Jobs that finish together are reported in fewer calls than jobs.
func TestWorkerBatchesCompletions(t *testing.T) {
	srv, admin := setup(t, "q")
	const n = 16
	ct := &countingTransport{path: "/v1/agent/complete"}
	c := client.New(srv.URL, srv.AdminToken, client.WithHTTPClient(&http.Client{Transport: ct}))
	var all sync.WaitGroup
	all.Add(n)
	gate := make(chan struct{})
	w := &client.Worker{Client: c, Concurrency: n, WaitMs: 1000, Handlers: map[string]client.Handler{
		"q": func(context.Context, *client.LeasedJob) (string, error) {
			all.Done()
			<-gate
			return "ok", nil
		},
	}}
	specs := make([]client.JobSpec, n)
	for i := range specs {
		specs[i] = client.JobSpec{Queue: "q", TimeoutMs: 50000}
	}
	ids := enqueue(t, admin, specs...)
	runWorker(t, w)
	all.Wait()
	close(gate)
	for _, id := range ids {
		if j := waitJob(t, admin, id, finished); j.State != client.StateSucceeded {
			t.Fatalf("job %+v", j)
		}
	}
	if got := ct.n.Load(); got >= n/2 {
		t.Fatalf("%d jobs finishing together were reported in %d calls", n, got)
	}
}

// A worker whose token the server refuses stops with the 401.
func TestWorkerRefusedToken(t *testing.T) {
	srv, _ := setup(t)
	w := &client.Worker{Client: client.New(srv.URL, "usher_wrong"), Default: func(context.Context, *client.LeasedJob) (string, error) {
		return "", nil
	}}
	if err := w.Run(t.Context()); client.StatusOf(err) != 401 {
		t.Fatalf("Run = %v, want the 401", err)
	}
}

// A worker whose lease lapsed (it renewed too rarely) learns it at its
// next renewal: the running handler's context ends with ErrLeaseLost, and
// the server has released the job to be retried.
func TestWorkerLeaseLost(t *testing.T) {
	srv := jobsapitest.StartWith(t, jobsapitest.Options{LeaseTTL: 100 * time.Millisecond})
	c := client.New(srv.URL, srv.AdminToken)
	if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	causes, started := make(chan error, 1), make(chan struct{})
	w := &client.Worker{Client: c, WaitMs: 10, RenewInterval: 500 * time.Millisecond, Handlers: map[string]client.Handler{
		"q": func(ctx context.Context, _ *client.LeasedJob) (string, error) {
			close(started)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return "", ctx.Err()
		},
	}}
	id := enqueue(t, c, client.JobSpec{Queue: "q", TimeoutMs: 50000,
		Retry: &client.RetryPolicy{MaxAttempts: 2, Backoff: &client.Backoff{Policy: client.BackoffConstant, BaseMs: 60000}}})[0]
	runWorker(t, w)
	testwait.Receive(t, 30*time.Second, started, "the handler starting the job")
	select {
	case cause := <-causes:
		if !errors.Is(cause, client.ErrLeaseLost) {
			t.Fatalf("cause = %v, want ErrLeaseLost", cause)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never learnt that the lease lapsed")
	}
	if j := waitJob(t, c, id, func(j client.Job) bool { return j.State != client.StateRunning }); j.State != client.StateDelayed {
		t.Fatalf("job after the lapse: %+v (want delayed for its retry)", j)
	}
}

// A worker without a default handler asks only for the queues it has
// handlers for: a job of another queue, even one of higher priority,
// stays queued for other workers.
func TestWorkerTakesOnlyItsQueues(t *testing.T) {
	_, c := setup(t)
	for _, q := range []client.QueueSpec{{Name: "urgent", Priority: 9}, {Name: "mine", Priority: 1}} {
		if _, err := c.CreateQueue(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	ids := enqueue(t, c, client.JobSpec{Queue: "urgent"}, client.JobSpec{Queue: "mine"})
	w := &client.Worker{Client: c, Agent: "picky", WaitMs: 1000, Handlers: map[string]client.Handler{
		"mine": func(context.Context, *client.LeasedJob) (string, error) { return "done", nil },
	}}
	r := runWorker(t, w)
	if j := waitJob(t, c, ids[1], finished); j.State != "succeeded" {
		t.Fatalf("the worker's own job = %+v", j)
	}
	r.stop()
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if j, err := c.Job(t.Context(), ids[0]); err != nil || j.State != "queued" {
		t.Fatalf("the other queue's job = %+v, %v; want it still queued", j, err)
	}
}

// A job the server leased to this agent in an answer the agent never got
// (here: leased by hand under the worker's name and dropped) comes back
// to the worker at its first lease, which lists what it holds.
func TestWorkerRecoversJobOfALostAnswer(t *testing.T) {
	_, c := setup(t, "q")
	id := enqueue(t, c, client.JobSpec{Queue: "q"})[0]
	if ans, err := c.Lease(t.Context(), client.LeaseRequest{Agent: "w-lost", Slots: 1}); err != nil || len(ans.Jobs) != 1 {
		t.Fatalf("lease = %+v, %v", ans, err)
	}
	w := &client.Worker{Client: c, Agent: "w-lost", WaitMs: 1000, Default: func(context.Context, *client.LeasedJob) (string, error) {
		return "ran", nil
	}}
	runWorker(t, w)
	if j := waitJob(t, c, id, finished); j.State != "succeeded" || j.Output != "ran" || j.Attempt != 1 {
		t.Fatalf("job = %+v; want it run by the worker at attempt 1", j)
	}
}

// A lease shorter than the worker's first guess (30 s) is renewed in
// time: a job that runs for several of the server's 600 ms leases is not
// lost.
func TestShortLeaseIsRenewedFromTheStart(t *testing.T) {
	srv := jobsapitest.StartWith(t, jobsapitest.Options{LeaseTTL: 600 * time.Millisecond})
	c := client.New(srv.URL, srv.AdminToken)
	if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: "q", Retry: &client.RetryPolicy{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	id := enqueue(t, c, client.JobSpec{Queue: "q"})[0]
	runWorker(t, &client.Worker{Client: c, Handlers: map[string]client.Handler{
		"q": func(ctx context.Context, job *client.LeasedJob) (string, error) {
			select {
			case <-time.After(2 * time.Second):
				return "done", nil
			case <-ctx.Done():
				return "", context.Cause(ctx)
			}
		}}})
	if j := waitJob(t, c, id, finished); j.State != client.StateSucceeded || j.Attempt != 1 {
		t.Fatalf("job = %s at attempt %d (%s); want succeeded at the first attempt", j.State, j.Attempt, j.Error)
	}
}
