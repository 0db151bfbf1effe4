package sched

import (
	"fmt"
	"math"
	"time"
)

// What a job's handler can say beside success and failure
// (docs/design.md, "Leases and retries"): snooze, cancel; and the
// policies of the wait between tries and of the server's time limit.

// BackoffPolicy is how the wait between tries grows with the attempts.
type BackoffPolicy uint8

// Backoff policies. The zero value is exponential.
const (
	// BackoffExponential waits Backoff·2^(n-1) after attempt n.
	BackoffExponential BackoffPolicy = iota
	// BackoffLinear waits Backoff·n after attempt n.
	BackoffLinear
	// BackoffConstant waits Backoff after every attempt.
	BackoffConstant
)

// maxWait bounds every computed wait, so that no doubling overflows.
const maxWait = 365 * 24 * time.Hour

// ceiling is the policy's wait after attempt n before any jitter: the
// policy's growth, at most MaxBackoff when that is set.
func (p RetryPolicy) ceiling(n int) time.Duration {
	if p.Backoff <= 0 {
		return 0
	}
	limit := maxWait
	if p.MaxBackoff > 0 {
		limit = min(limit, p.MaxBackoff)
	}
	d := p.Backoff
	switch p.Policy {
	case BackoffLinear:
		if n > 1 && d > limit/time.Duration(n) {
			return limit
		}
		d *= time.Duration(max(n, 1))
	case BackoffConstant:
	default:
		for i := 1; i < n && d < limit; i++ {
			d *= 2
		}
	}
	return min(d, limit)
}

// backoff is the wait before the try after attempt n: the policy's
// ceiling, or with Jitter a uniformly random wait in [0, ceiling] (full
// jitter) drawn from the scheduler's injected source.
func (s *Scheduler) backoff(p RetryPolicy, n int) time.Duration {
	d := p.ceiling(n)
	if !p.Jitter || d <= 0 {
		return d
	}
	return time.Duration(s.rng.Int64N(int64(d) + 1))
}

// validateBackoff checks the policy. A MaxBackoff below Backoff is
// allowed (every wait is MaxBackoff then); the API refuses it in its
// newer backoff form.
func validateBackoff(p *RetryPolicy) error {
	if p.Policy > BackoffConstant {
		return fmt.Errorf("%w: unknown backoff policy %d", ErrInvalidJob, p.Policy)
	}
	return nil
}

// Snooze ends a running attempt that asked to run again after d: the job
// waits d (joining its queue at once when d <= 0) and the attempt does not
// count toward MaxAttempts; the next run reuses its number. A report for
// an attempt that is not running is ignored (Ack.Ignored).
func (s *Scheduler) Snooze(id string, attempt int, d time.Duration) Ack {
	j := s.runningJob(id)
	if j == nil || int(j.attempt) != attempt || j.isInteractive() {
		return Ack{Ignored: true}
	}
	s.release(j)
	s.stats.Snoozes++
	j.attempt--
	at := s.now().Add(min(max(d, 0), maxWait))
	if d <= 0 {
		s.makeReady(j)
	} else {
		s.delay(j, at)
	}
	return Ack{Retrying: true, RetryAt: at}
}

// limitRef is a running attempt's time limit in the limits heap: the
// attempt is s.runs[run] while that run's startSeq is still seq and its
// limitAt the entry's time. Entries whose attempt ended or whose limit
// moved are skipped when they reach the top.
type limitRef struct {
	seq uint64
	run int32
}

// setLimit (re)computes the time limit of a running job, when the
// scheduler enforces limits: its own timeout or its tier's duration,
// whichever is shorter, plus the grace, counted from its start.
func (s *Scheduler) setLimit(j *job) {
	if s.grace == nil || j.isInteractive() {
		return
	}
	r := s.run(j)
	limit := s.tiers[r.tier].Duration
	if x := s.jobs.ext(j); x != nil && x.timeout > 0 {
		limit = min(limit, x.timeout)
	}
	at := r.started + int64(limit+s.grace(limit))
	if at < r.started { // overflow
		at = math.MaxInt64
	}
	r.limitAt = at
	s.timeLimits.push(at, limitRef{seq: r.startSeq, run: j.pos})
}

// limitJob returns the running job of a limit entry, or nil when the entry
// is stale.
func (s *Scheduler) limitJob(e timed[limitRef]) *job {
	if int(e.v.run) >= len(s.runs) {
		return nil
	}
	r := &s.runs[e.v.run]
	if r.startSeq != e.v.seq || r.limitAt != e.at || r.worker == nil {
		return nil
	}
	return s.jobs.At(r.job)
}

// expireLimits fails the attempts that ran past their time limit and
// grace: each is released (EventTimedOut tells the driver to stop it) and
// retried or failed by its policy.
func (s *Scheduler) expireLimits(now int64) {
	for len(s.timeLimits) > 0 && s.timeLimits[0].at <= now {
		e := s.timeLimits.pop()
		j := s.limitJob(e)
		if j == nil {
			continue
		}
		w, attempt := s.run(j).worker, int(j.attempt)
		id := j.id // j may be recycled below
		s.release(j)
		s.stats.TimeLimits++
		s.emit(Event{Kind: EventTimedOut, JobID: id, WorkerID: w.id, Attempt: attempt})
		if again, at := s.retryOrFail(j); again {
			s.emit(Event{Kind: EventRetrying, JobID: id, WorkerID: w.id, Attempt: attempt, At: at, TimedOut: true})
		} else {
			s.emit(Event{Kind: EventFailed, JobID: id, WorkerID: w.id, Attempt: attempt, TimedOut: true})
		}
	}
}

// nextLimit is the earliest time limit, or 0 when there is none. It drops
// stale entries from the top first, so that an attempt that ended wakes
// nobody.
func (s *Scheduler) nextLimit() int64 {
	for len(s.timeLimits) > 0 && s.limitJob(s.timeLimits[0]) == nil {
		s.timeLimits.pop()
	}
	if len(s.timeLimits) == 0 {
		return 0
	}
	return s.timeLimits[0].at
}
