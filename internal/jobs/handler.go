package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// What a job's handler can say beside success and failure, and the
// server's time limits (docs/design.md, "Leases and retries").

// Limits of what a handler reports (jobtype.MaxResult,
// MaxProgressMessage, MaxSnoozeMs) and of a backoff.
const (
	MaxResult          = jobtype.MaxResult
	MaxProgressMessage = jobtype.MaxProgressMessage
	MaxSnoozeMs        = jobtype.MaxSnoozeMs
	// MaxBackoffMs caps a backoff's base and maximum: one week.
	MaxBackoffMs = 7 * 24 * 3600 * 1000
)

// Grace is how long past its time limit a running job may go before the
// server fails the attempt, even while its agent renews: a tenth of the
// limit, at least 5 s.
func Grace(limit time.Duration) time.Duration { return max(5*time.Second, limit/10) }

// ErrTimeLimit is the error of an attempt the server failed because it
// ran past its time limit and grace.
var ErrTimeLimit = errors.New("the job ran past its time limit and grace; the server ended the attempt")

// cancelledByHandler is the error of a cancelled job whose handler gave
// none.
const cancelledByHandler = "cancelled by its handler"

// normalBackoff names the default policy.
func normalBackoff(b jobtype.Backoff) jobtype.Backoff {
	if b.Policy == "" {
		b.Policy = jobtype.BackoffExponential
	}
	return b
}

// normalRetry puts a retry policy in its stored form: the older
// backoffMs/maxBackoffMs become an exponential Backoff (a maximum below
// the base, which they allowed, becomes the base: every wait was the
// maximum), and an exponential Backoff is mirrored in them.
func normalRetry(r jobtype.RetryPolicy) jobtype.RetryPolicy {
	if r.Backoff == nil && r.BackoffMs > 0 {
		base := r.BackoffMs
		if r.MaxBackoffMs > 0 && r.MaxBackoffMs < base {
			base = r.MaxBackoffMs
		}
		r.Backoff = &jobtype.Backoff{BaseMs: base, MaxMs: r.MaxBackoffMs}
	}
	if r.Backoff == nil {
		return r
	}
	b := normalBackoff(*r.Backoff)
	r.Backoff = &b
	r.BackoffMs, r.MaxBackoffMs = 0, 0
	if b.Policy == jobtype.BackoffExponential {
		r.BackoffMs, r.MaxBackoffMs = b.BaseMs, b.MaxMs
	}
	return r
}

// coreBackoff checks a normalized backoff and returns it as the core's
// (only its backoff fields set). Exponential waits get full jitter.
func coreBackoff(b jobtype.Backoff) (sched.RetryPolicy, error) {
	var p sched.RetryPolicy
	switch b.Policy {
	case jobtype.BackoffExponential:
		p.Policy, p.Jitter = sched.BackoffExponential, true
	case jobtype.BackoffLinear:
		p.Policy = sched.BackoffLinear
	case jobtype.BackoffConstant:
		p.Policy = sched.BackoffConstant
	default:
		return p, invalid("policy", "%q is not exponential, linear or constant", b.Policy)
	}
	switch {
	case b.BaseMs < 0 || b.BaseMs > MaxBackoffMs:
		return p, invalid("baseMs", "%d is outside 0..%d", b.BaseMs, MaxBackoffMs)
	case b.MaxMs < 0 || b.MaxMs > MaxBackoffMs:
		return p, invalid("maxMs", "%d is outside 0..%d", b.MaxMs, MaxBackoffMs)
	case b.MaxMs > 0 && b.MaxMs < b.BaseMs:
		return p, invalid("maxMs", "%d is below baseMs (%d)", b.MaxMs, b.BaseMs)
	}
	p.Backoff = time.Duration(b.BaseMs) * time.Millisecond
	p.MaxBackoff = time.Duration(b.MaxMs) * time.Millisecond
	return p, nil
}

// checkResult validates what a result says beside its outcome.
func checkResult(r *jobtype.Result) error {
	switch {
	case r.ID == "" || r.Attempt < 1:
		return invalid("", "needs an id and an attempt of at least 1")
	case r.SnoozeMs < 0 || r.SnoozeMs > MaxSnoozeMs:
		return invalid("snoozeMs", "%d is outside 0..%d", r.SnoozeMs, MaxSnoozeMs)
	case r.SnoozeMs > 0 && r.Cancel:
		return invalid("cancel", "a result snoozes or cancels, not both")
	case len(r.Value) > MaxResult:
		return invalid("result", "%d bytes, over the limit of %d", len(r.Value), MaxResult)
	case len(r.Value) > 0 && !json.Valid(r.Value):
		return invalid("result", "not valid JSON")
	}
	return nil
}

// snoozeLocked puts a snoozed job back to wait, its attempt not counted.
func (e *Engine) snoozeLocked(r *jobtype.Result) jobtype.Ack {
	ack := e.core.Snooze(r.ID, r.Attempt, time.Duration(r.SnoozeMs)*time.Millisecond)
	j := e.live[r.ID]
	if ack.Ignored || j == nil {
		return jobtype.Ack{ID: r.ID, Ignored: true}
	}
	e.observeEnd(j, OutcomeSnoozed)
	e.readied(j, ack.RetryAt)
	e.dropHeld(j)
	j.running, j.agent, j.attempt = false, "", r.Attempt-1
	if ack.RetryAt.After(e.cfg.Now()) {
		j.retryAt = ack.RetryAt
	}
	e.emit(Op{Kind: OpSnooze, ID: j.n, Attempt: j.attempt, At: ack.RetryAt})
	return jobtype.Ack{ID: r.ID, Snoozed: true}
}

// handlerCancelLocked fails a job for good at its handler's word.
func (e *Engine) handlerCancelLocked(r *jobtype.Result, now time.Time) jobtype.Ack {
	if ack := e.core.Complete(r.ID, r.Attempt, sched.FailedFinal); ack.Ignored {
		return jobtype.Ack{ID: r.ID, Ignored: true}
	}
	if r.Error == "" {
		r.Error = cancelledByHandler
	}
	e.finished(r.ID, jobtype.StateFailed, now, r)
	return jobtype.Ack{ID: r.ID}
}

func checkProgress(req *jobtype.ProgressRequest) error {
	if err := checkAgentName(req.Agent); err != nil {
		return err
	}
	switch {
	case req.ID == "":
		return invalid("id", "required")
	case req.Attempt < 1:
		return invalid("attempt", "%d is below 1", req.Attempt)
	case math.IsNaN(req.Value) || req.Value < 0 || req.Value > 1:
		return invalid("value", "%g is outside 0..1", req.Value)
	case len(req.Message) > MaxProgressMessage:
		return invalid("message", "%d bytes, over the limit of %d", len(req.Message), MaxProgressMessage)
	}
	return nil
}

// Progress records how far a running attempt got; the latest report is
// kept with the job. It renews the agent's lease. A report for an
// attempt that is not running on that agent is ignored.
func (e *Engine) Progress(ctx context.Context, req jobtype.ProgressRequest) (jobtype.ProgressAnswer, error) {
	if err := checkProgress(&req); err != nil {
		return jobtype.ProgressAnswer{}, err
	}
	e.mu.Lock()
	_ = e.core.Renew(req.Agent)
	j := e.live[req.ID]
	if j == nil || !j.running || j.attempt != req.Attempt || j.agent != req.Agent {
		e.mu.Unlock()
		return jobtype.ProgressAnswer{Ignored: true}, nil
	}
	e.emit(Op{Kind: OpProgress, ID: j.n, Progress: &jobtype.Progress{Value: req.Value, Message: req.Message}})
	if err := e.commit(ctx); err != nil {
		return jobtype.ProgressAnswer{}, fmt.Errorf("jobs: progress of job %s: %w", req.ID, err)
	}
	return jobtype.ProgressAnswer{}, nil
}
