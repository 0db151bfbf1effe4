package client

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/internal/telemetry"
)

// Handler runs one job and returns its output. A returned error fails the
// job with exit code 1 and the error's text, or with the error's own code
// when it has a method ExitCode() int (as *exec.ExitError has). ctx ends at
// the job's time limit, when the server stops the job, or when the worker
// aborts; context.Cause(ctx) tells which (ErrJobTimeout, ErrJobStopped,
// ErrAborted, ErrLeaseLost; compare with errors.Is).
type Handler func(ctx context.Context, job *LeasedJob) (output string, err error)

// Causes of a job context's end (context.Cause of a Handler's ctx).
var (
	// ErrJobTimeout: the job ran for its time limit.
	ErrJobTimeout = errors.New("job ran past its time limit")
	// ErrJobStopped: the server told the agent to stop the job (it was
	// cancelled, downgraded past its new duration, or failed by the server
	// past its time limit and grace).
	ErrJobStopped = errors.New("job stopped by the server")
	// ErrAborted: the worker was aborted (Worker.Abort).
	ErrAborted = errors.New("worker aborted")
	// ErrLeaseLost: the agent's lease lapsed, so the server released the
	// job to run elsewhere.
	ErrLeaseLost = errors.New("agent lease lapsed")
)

// Worker runs jobs of the queues it has handlers for as one agent: it
// leases up to Concurrency jobs at once (long-polling when there is no
// work), runs each in its own goroutine with a context that ends at the
// job's time limit, renews its lease while jobs run (obeying the server's
// stops and shorter time limits), reports results in batches, and backs off
// with jitter when calls fail.
//
// Run's context ending is a graceful stop: no more work is fetched, running
// jobs finish and are reported, then the agent leaves. Abort ends running
// jobs at once. Set the fields before Run and leave them alone while it
// runs; a Worker runs one Run at a time.
type Worker struct {
	// Client is the API client; its token needs the agent (or admin) role.
	Client *Client
	// Agent names this agent to the server, unique per process (default:
	// host name and process id).
	Agent string
	// Capabilities are offered to queues' requirements; the server hands
	// out jobs of every queue whose requirements they meet.
	Capabilities []string
	// Concurrency is how many jobs run at once (default 1).
	Concurrency int
	// Handlers run jobs by queue name. Without a Default, the worker asks
	// the server for jobs of these queues only.
	Handlers map[string]Handler
	// Default runs jobs of queues without an entry in Handlers; with it the
	// worker takes jobs of any queue it serves.
	Default Handler
	// WaitMs is how long one lease request waits for work (default 30000,
	// at most 60000); 0 takes the default, a negative value polls.
	WaitMs int
	// Grace is how long a handler may take to return after its context
	// ended before the job is reported failed and the handler abandoned
	// (default 5 s).
	Grace time.Duration
	// RenewInterval is how often the lease is renewed while jobs run
	// (default: a third of the lease the server grants).
	RenewInterval time.Duration
	// MaxBackoff caps the wait between failed calls (default 10 s).
	MaxBackoff time.Duration
	// Logger receives the worker's logs (default slog.Default()).
	Logger *slog.Logger
	// ExitWhenIdle, when positive, stops Run (gracefully, returning nil)
	// once no job has run or been handed out for that long.
	ExitWhenIdle time.Duration
	// UntilWorkflow, when set, stops Run (gracefully, returning nil) once
	// that workflow has finished, succeeded or failed; Run returns an error
	// when the server does not know it.
	UntilWorkflow string
	// TracerProvider makes the span of each job's handler, a child of the
	// trace the job carries (LeasedJob.Traceparent), with the job's
	// queue, id and attempt as attributes; the handler's context holds
	// it. Default: OpenTelemetry's global provider, which records
	// nothing until a program sets one up.
	TracerProvider trace.TracerProvider

	mu      sync.Mutex
	aborted bool
	onAbort func()
}

// Abort ends the running jobs of a Run at once (their contexts end with
// ErrAborted; they are reported failed) and stops fetching work; Run then
// returns after reporting them and leaving. It does nothing when no Run is
// going, except that a Run started later aborts at once.
func (w *Worker) Abort() {
	w.mu.Lock()
	w.aborted = true
	f := w.onAbort
	w.mu.Unlock()
	if f != nil {
		f()
	}
}

// Run serves jobs until ctx ends (a graceful stop) or Abort is called, and
// returns nil then. It returns an error at once for an invalid Worker, and
// after a graceful stop when the server refused the agent's token or
// request (401, 403, 400).
func (w *Worker) Run(ctx context.Context) error {
	r, err := w.newRun()
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.onAbort = r.abort
	aborted := w.aborted
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.onAbort = nil
		w.mu.Unlock()
	}()
	if aborted {
		r.abort()
	}
	return r.run(ctx)
}

func (w *Worker) newRun() (*run, error) {
	if w.Client == nil {
		return nil, errors.New("worker: no Client")
	}
	if len(w.Handlers) == 0 && w.Default == nil {
		return nil, errors.New("worker: no handlers")
	}
	r := &run{w: w, agent: w.Agent, slots: max(w.Concurrency, 1), wait: w.WaitMs,
		grace: w.Grace, maxBackoff: w.MaxBackoff, log: w.Logger, running: map[JobRef]*task{}, held: map[JobRef]struct{}{}}
	if r.agent == "" {
		host, _ := os.Hostname()
		r.agent = host + "-" + strconv.Itoa(os.Getpid())
	}
	if r.wait == 0 {
		r.wait = 30000
	}
	r.wait = min(max(r.wait, 0), 60000)
	if r.grace <= 0 {
		r.grace = 5 * time.Second
	}
	if r.maxBackoff <= 0 {
		r.maxBackoff = 10 * time.Second
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	tp := w.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	r.tracer = tp.Tracer(telemetry.TracerName)
	r.log = r.log.With("agent", r.agent)
	r.abortCtx, r.abortJobs = context.WithCancelCause(context.Background())
	r.results = make(chan Result, r.slots)
	r.freed = make(chan struct{}, 1)
	r.leaseMs.Store(30000)
	r.leaseChanged = make(chan struct{}, 1)
	r.active()
	return r, nil
}

// backoff returns the jittered wait before try n (0-based) of a failed
// call: 100 ms doubling up to max, each wait between half and all of it.
func backoff(n int, maxWait time.Duration) time.Duration {
	d := maxWait
	if n < 20 {
		d = min(100*time.Millisecond<<n, maxWait)
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx ends; it reports whether the wait was whole.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// fatal reports whether a failed lease means the agent cannot work at all.
func fatal(err error) bool {
	switch StatusOf(err) {
	case 400, 401, 403:
		return true
	}
	return false
}

// retryable reports whether a failed call may succeed when repeated.
func retryable(err error) bool {
	s := StatusOf(err)
	return s == 0 || s == 408 || s == 429 || s >= 500
}

// queues are the queues the worker asks for: those of its handlers, or
// none (any queue) when it has a default handler.
func (w *Worker) queues() []string {
	if w.Default != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(w.Handlers))
}
