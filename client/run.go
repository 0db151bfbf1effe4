package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/internal/telemetry"
)

// run is the state of one Worker.Run.
type run struct {
	w                 *Worker
	agent             string
	slots, wait       int
	grace, maxBackoff time.Duration
	log               *slog.Logger
	tracer            trace.Tracer

	abortCtx  context.Context // parent of every job's context; ends at Abort
	abortJobs context.CancelCauseFunc
	results   chan Result   // finished jobs, to the completer
	freed     chan struct{} // a slot became free (capacity 1)
	leaseMs   atomic.Int64
	// leaseChanged wakes the renewer when leaseMs changes (capacity 1).
	leaseChanged chan struct{}
	// lastActive is when the worker last had work (unix ns), for
	// Worker.ExitWhenIdle.
	lastActive atomic.Int64
	jobs       sync.WaitGroup // running execute goroutines

	mu      sync.Mutex
	held    map[JobRef]struct{} // jobs leased and not yet reported
	running map[JobRef]*task
}

// task is one running job.
type task struct {
	job    LeasedJob
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time

	mu     sync.Mutex
	limit  time.Duration // 0: none
	timer  *time.Timer
	result []byte // the handler's JSON result (SetResult)
	run    *run
}

// outcome is what a handler returned, or that it did not return in time.
type outcome struct {
	output    string
	err       error
	abandoned bool
}

// maxCompleteBatch caps the results reported in one call.
const maxCompleteBatch = 1000

func (r *run) abort() { r.abortJobs(ErrAborted) }

// run fetches work until ctx ends or the worker aborts, then lets the
// running jobs end, reports them and leaves.
func (r *run) run(ctx context.Context) error {
	fetchCtx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	defer context.AfterFunc(r.abortCtx, stopFetch)()
	completed := make(chan struct{})
	go r.completer(completed)
	stopRenew, renewed := make(chan struct{}), make(chan struct{})
	go r.renewer(stopRenew, renewed)
	r.log.Info("worker: serving", "slots", r.slots, "capabilities", r.w.Capabilities)
	watched := make(chan error, 1)
	if r.w.UntilWorkflow != "" {
		go func() { watched <- r.watchWorkflow(fetchCtx, stopFetch) }()
	} else {
		watched <- nil
	}
	err := r.fetch(fetchCtx)
	stopFetch()
	err = errors.Join(err, <-watched)
	r.log.Info("worker: stopped fetching; waiting for running jobs", "running", r.count())
	r.jobs.Wait()
	close(stopRenew)
	<-renewed
	close(r.results)
	<-completed
	r.leave()
	r.abortJobs(context.Canceled)
	return err
}

// fetch leases work for the free slots until ctx ends.
func (r *run) fetch(ctx context.Context) error {
	fails, idle := 0, 0
	var listed time.Time // when the lease last listed the jobs held
	for ctx.Err() == nil {
		free := r.gather(ctx)
		if free == 0 {
			continue
		}
		wait, ok := r.leaseWait()
		if !ok {
			return nil
		}
		req := LeaseRequest{Agent: r.agent, Capabilities: r.w.Capabilities, Queues: r.w.queues(),
			Slots: r.slots, Max: free, WaitMs: wait}
		if fails > 0 || time.Since(listed) > holdingEvery {
			req.Holding, listed = r.holding(), time.Now()
		}
		began := time.Now()
		ans, err := r.w.Client.Lease(ctx, req)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && fatal(err):
			r.log.Error("worker: the server refused the lease", "err", err)
			return fmt.Errorf("worker %s: lease: %w", r.agent, err)
		case err != nil:
			// The answer may be lost with jobs in it: the next lease lists
			// the jobs held, so that the server hands those back.
			d := backoff(fails, r.maxBackoff)
			fails++
			r.log.Warn("worker: lease failed; backing off", "err", err, "wait", d)
			sleep(ctx, d)
			continue
		}
		fails = 0
		r.setLease(ans.LeaseMs)
		for i := range ans.Jobs {
			r.start(ans.Jobs[i])
		}
		idle = r.idleWait(ctx, len(ans.Jobs), time.Since(began), idle)
	}
	return nil
}

// holdingEvery is how often a lease lists the jobs held even when no
// lease failed: it also recovers answers lost without an error here.
const holdingEvery = 10 * time.Second

// gather returns the free slots once there are some. While jobs run and
// only a few slots are free, it waits up to gatherWait for more to free,
// so that a busy worker asks for work in batches rather than a job at a
// time.
func (r *run) gather(ctx context.Context) int {
	timer := time.NewTimer(gatherWait)
	defer timer.Stop()
	for {
		free := r.free()
		if free > 0 && (free >= max(r.slots/8, 1) || free == r.slots) {
			return free
		}
		select {
		case <-r.freed:
		case <-ctx.Done():
			return 0
		case <-timer.C:
			if free > 0 {
				return free
			}
			timer.Reset(gatherWait)
		}
	}
}

// gatherWait is how long a busy worker waits for more free slots.
const gatherWait = 2 * time.Millisecond

// idleWait backs off after an answer with no jobs that came back without
// waiting (a polling worker, or a server that answers early), so that an
// idle worker does not spin; it returns the new count of such answers.
func (r *run) idleWait(ctx context.Context, jobs int, took time.Duration, idle int) int {
	if jobs > 0 || took >= time.Duration(r.wait)*time.Millisecond/2 && r.wait > 0 {
		return 0
	}
	sleep(ctx, backoff(idle, min(r.maxBackoff, 2*time.Second)))
	return idle + 1
}

func (r *run) free() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.slots - len(r.held)
}

// holding lists the jobs leased and not yet reported, for the server to
// hand back any it leased to this agent in an answer that got lost.
func (r *run) holding() *[]JobRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]JobRef, 0, len(r.held))
	for ref := range r.held {
		out = append(out, ref)
	}
	return &out
}

func (r *run) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

// release frees the slots of reported jobs.
func (r *run) release(batch []Result) {
	r.mu.Lock()
	for _, res := range batch {
		delete(r.held, JobRef{ID: res.ID, Attempt: res.Attempt})
	}
	r.mu.Unlock()
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// start takes a slot for a leased job and runs it.
func (r *run) start(job LeasedJob) {
	r.mu.Lock()
	r.held[JobRef{ID: job.ID, Attempt: job.Attempt}] = struct{}{}
	r.mu.Unlock()
	r.active()
	r.jobs.Add(1)
	go r.execute(job)
}

func (r *run) handler(queue string) Handler {
	if h, ok := r.w.Handlers[queue]; ok && h != nil {
		return h
	}
	return r.w.Default
}

// execute runs a job's handler and hands its result to the completer. A
// handler that does not return within Grace after its context ended is
// abandoned and its job reported failed.
func (r *run) execute(job LeasedJob) {
	defer r.jobs.Done()
	h := r.handler(job.Queue)
	if h == nil {
		r.log.Warn("worker: no handler for the queue of a leased job", "job", job.ID, "queue", job.Queue)
		r.results <- Result{ID: job.ID, Attempt: job.Attempt, ExitCode: 1,
			Error: fmt.Sprintf("agent %s has no handler for queue %q", r.agent, job.Queue)}
		return
	}
	t := r.track(job)
	ctx, span := r.jobSpan(t)
	done := make(chan outcome, 1)
	entered := make(chan struct{})
	go func() {
		close(entered)
		done <- call(h, ctx, &t.job)
	}()
	if job.ConfirmStart {
		<-entered // the handler is being called: its start comes before the next job's
		r.confirmStart(t)
	}
	var o outcome
	select {
	case o = <-done:
	case <-t.ctx.Done():
		grace := time.NewTimer(r.grace)
		select {
		case o = <-done:
		case <-grace.C:
			o.abandoned = true
			r.log.Error("worker: a handler ignored its context; abandoning it", "job", job.ID,
				"cause", context.Cause(t.ctx), "grace", r.grace)
		}
		grace.Stop()
	}
	res := result(t, o, r.grace)
	endJobSpan(span, res)
	r.untrack(t)
	r.active()
	r.results <- res
}

// jobSpan starts the span of a job's handler, a child of the job's trace
// (docs/operations.md, "Tracing").
func (r *run) jobSpan(t *task) (context.Context, trace.Span) {
	j := &t.job
	return r.tracer.Start(telemetry.WithParent(t.ctx, j.Traceparent), "process "+j.Queue,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String(telemetry.AttrSystem, telemetry.System),
			attribute.String(telemetry.AttrQueue, j.Queue), attribute.String(telemetry.AttrJobID, j.ID),
			attribute.Int(telemetry.AttrAttempt, j.Attempt), attribute.String(telemetry.AttrAgent, r.agent)))
}

// endJobSpan ends a handler's span with the attempt's outcome.
func endJobSpan(span trace.Span, res Result) {
	if !res.Succeeded() && res.SnoozeMs == 0 {
		msg := res.Error
		if msg == "" {
			msg = "exit code " + strconv.Itoa(res.ExitCode)
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// call runs a handler, turning a panic into an error.
func call(h Handler, ctx context.Context, job *LeasedJob) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = outcome{err: fmt.Errorf("handler panicked: %v", p)}
		}
	}()
	out, err := h(ctx, job)
	return outcome{output: out, err: err}
}

// track registers a running job: its context, which ends at the job's
// time limit, and its place in the map that renewals consult.
func (r *run) track(job LeasedJob) *task {
	t := &task{job: job, start: time.Now(), run: r}
	t.ctx, t.cancel = context.WithCancelCause(context.WithValue(r.abortCtx, taskKey{}, t))
	if job.TimeoutMs > 0 {
		t.shorten(time.Duration(job.TimeoutMs) * time.Millisecond)
	}
	r.mu.Lock()
	r.running[JobRef{ID: job.ID, Attempt: job.Attempt}] = t
	r.mu.Unlock()
	return t
}

func (r *run) untrack(t *task) {
	r.mu.Lock()
	delete(r.running, JobRef{ID: t.job.ID, Attempt: t.job.Attempt})
	r.mu.Unlock()
	t.mu.Lock()
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Unlock()
	t.cancel(context.Canceled)
}

// shorten sets the job's time limit, counted from its start, when it is
// shorter than the one it has; a limit already passed ends the job now.
func (t *task) shorten(limit time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.limit > 0 && limit >= t.limit {
		return
	}
	t.limit = limit
	left := time.Until(t.start.Add(limit))
	if t.timer == nil {
		t.timer = time.AfterFunc(left, t.timedOut)
		return
	}
	t.timer.Reset(left)
}

func (t *task) timedOut() {
	t.mu.Lock()
	limit := t.limit
	t.mu.Unlock()
	t.cancel(fmt.Errorf("%w (%s)", ErrJobTimeout, limit))
}

// result turns a handler's outcome into the job's result.
func result(t *task, o outcome, grace time.Duration) Result {
	res := Result{ID: t.job.ID, Attempt: t.job.Attempt, Output: o.output}
	cause := context.Cause(t.ctx)
	var (
		sz *snoozeError
		ce *cancelError
	)
	switch {
	case o.abandoned:
		res.ExitCode = 1
		res.Error = fmt.Sprintf("%v; the handler did not return within %s after that and was abandoned", cause, grace)
	case errors.As(o.err, &sz):
		res.SnoozeMs = max(sz.d.Milliseconds(), 1)
	case errors.As(o.err, &ce):
		res.Cancel, res.ExitCode, res.Error = true, exitCode(ce.err), errorText(ce.err, cause)
	case o.err != nil:
		res.ExitCode = exitCode(o.err)
		res.Error = errorText(o.err, cause)
	}
	if !o.abandoned {
		t.mu.Lock()
		res.Value = t.result
		t.mu.Unlock()
	}
	return res
}

// exitCode is the code of an error that has one (ExitCode() int, not 0),
// else 1.
func exitCode(err error) int {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) && ec.ExitCode() != 0 {
		return ec.ExitCode()
	}
	return 1
}

// errorText describes a failure: the handler's error, led by the reason
// its context ended when it did.
func errorText(err, cause error) string {
	switch {
	case cause == nil || errors.Is(err, cause):
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return cause.Error()
	default:
		return cause.Error() + ": " + err.Error()
	}
	if s := err.Error(); s != "" {
		return s
	}
	return "failed"
}

// completer reports results: whatever finished while the previous report
// was on its way goes in one call.
func (r *run) completer(done chan<- struct{}) {
	defer close(done)
	batch := make([]Result, 0, r.slots)
	for res := range r.results {
		batch = append(batch[:0], res)
	drain:
		for len(batch) < maxCompleteBatch {
			select {
			case res, ok := <-r.results:
				if !ok {
					break drain
				}
				batch = append(batch, res)
			default:
				break drain
			}
		}
		r.report(batch)
		clear(batch)
	}
}

// report sends a batch of results, retrying transport and server errors
// with backoff until it is acknowledged, refused, or the worker aborts,
// then frees the batch's slots.
func (r *run) report(batch []Result) {
	defer r.release(batch)
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		acks, err := r.w.Client.Complete(ctx, r.agent, batch...)
		cancel()
		if err == nil {
			r.logAcks(batch, acks)
			return
		}
		if !retryable(err) || r.abortCtx.Err() != nil {
			r.log.Error("worker: reporting results failed; they are lost", "err", err, "results", len(batch))
			return
		}
		d := backoff(n, r.maxBackoff)
		r.log.Warn("worker: reporting results failed; retrying", "err", err, "wait", d)
		sleep(r.abortCtx, d)
	}
}

func (r *run) logAcks(batch []Result, acks []Ack) {
	if !r.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	for i, res := range batch {
		var ack Ack
		if i < len(acks) {
			ack = acks[i]
		}
		r.log.Debug("worker: reported", "job", res.ID, "attempt", res.Attempt, "exitCode", res.ExitCode,
			"ignored", ack.Ignored, "retrying", ack.Retrying)
	}
}

// renewer renews the lease every third of its length while jobs run, and
// applies the server's stops and new time limits.
func (r *run) renewer(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	fails := 0
	for {
		every := r.renewInterval()
		if fails > 0 {
			every = min(every, backoff(fails-1, every))
		}
		t := time.NewTimer(every)
		select {
		case <-stop:
			t.Stop()
			return
		case <-r.leaseChanged: // the server's lease is not the one the wait was made for
			t.Stop()
			continue
		case <-t.C:
		}
		if r.count() == 0 {
			fails = 0
			continue
		}
		if r.renew() {
			fails = 0
		} else {
			fails++
		}
	}
}

// setLease records the lease length the server granted (0: none given)
// and wakes the renewer when it changed, so that its wait follows it: a
// lease shorter than the default would otherwise lapse before the first
// renewal.
func (r *run) setLease(ms int64) {
	if ms <= 0 || r.leaseMs.Swap(ms) == ms {
		return
	}
	select {
	case r.leaseChanged <- struct{}{}:
	default:
	}
}

func (r *run) renewInterval() time.Duration {
	if r.w.RenewInterval > 0 {
		return r.w.RenewInterval
	}
	return max(time.Duration(r.leaseMs.Load())*time.Millisecond/3, 10*time.Millisecond)
}

// renew renews the lease once and reports whether it got an answer.
func (r *run) renew() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.leaseMs.Load())*time.Millisecond)
	ans, err := r.w.Client.Renew(ctx, r.agent)
	cancel()
	switch {
	case StatusOf(err) == 404:
		r.log.Error("worker: the lease lapsed; the server released this agent's jobs", "err", err)
		r.endAll(ErrLeaseLost)
		return true
	case err != nil:
		r.log.Warn("worker: renewing the lease failed", "err", err)
		return false
	}
	r.setLease(ans.LeaseMs)
	r.apply(ans)
	return true
}

// apply ends the jobs the server stopped and shortens the limits it
// lowered.
func (r *run) apply(ans RenewAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ref := range ans.Stop {
		if t, ok := r.running[ref]; ok {
			r.log.Info("worker: the server stopped a job", "job", ref.ID, "attempt", ref.Attempt)
			t.cancel(ErrJobStopped)
		}
	}
	for _, to := range ans.Timeouts {
		if t, ok := r.running[JobRef{ID: to.ID, Attempt: to.Attempt}]; ok {
			t.shorten(time.Duration(to.TimeoutMs) * time.Millisecond)
		}
	}
}

// endAll ends every running job with cause.
func (r *run) endAll(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.running {
		t.cancel(cause)
	}
}

// leave tells the server the agent is gone.
func (r *run) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.w.Client.Leave(ctx, r.agent); err != nil && StatusOf(err) != 404 {
		r.log.Warn("worker: leaving failed", "err", err)
		return
	}
	r.log.Info("worker: left")
}
