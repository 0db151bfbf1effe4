package jobs

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

var queueName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// CreateQueue defines a new queue; ErrConflict when it exists.
func (e *Engine) CreateQueue(ctx context.Context, q jobtype.Queue) (jobtype.Queue, error) {
	if !queueName.MatchString(q.Name) {
		return jobtype.Queue{}, invalid("name", "%q is not 1-128 characters of A-Z a-z 0-9 . _ -", q.Name)
	}
	e.mu.Lock()
	if _, ok := e.queues[q.Name]; ok {
		e.mu.Unlock()
		return jobtype.Queue{}, conflict("name", "queue %q exists", q.Name)
	}
	return e.putQueueLocked(ctx, q)
}

// UpdateQueue changes the given fields of a queue.
func (e *Engine) UpdateQueue(ctx context.Context, name string, p jobtype.QueueUpdate) (jobtype.Queue, error) {
	e.mu.Lock()
	q, ok := e.queues[name]
	if !ok {
		e.mu.Unlock()
		return jobtype.Queue{}, notFound("", "no queue %q", name)
	}
	applyPatch(&q, p)
	return e.putQueueLocked(ctx, q)
}

func applyPatch(q *jobtype.Queue, p jobtype.QueueUpdate) {
	if p.Priority != nil {
		q.Priority = *p.Priority
	}
	if p.Requires != nil {
		q.Requires = *p.Requires
	}
	if p.Order != nil {
		q.Order = *p.Order
	}
	if p.Batch != nil {
		q.Batch = *p.Batch
	}
	if p.Active != nil {
		q.Active = *p.Active
	}
	if p.Retry != nil {
		q.Retry = *p.Retry
	}
	if p.StrictStart != nil {
		q.StrictStart = *p.StrictStart
	}
}

// putQueueLocked validates q, defines it in the core and stores it; it
// unlocks e.mu.
func (e *Engine) putQueueLocked(ctx context.Context, q jobtype.Queue) (jobtype.Queue, error) {
	q = normalQueue(q)
	spec, err := coreQueue(q)
	if err == nil {
		if cerr := e.core.DefineQueue(spec); cerr != nil {
			err = invalid("", "%v", cerr)
		}
	}
	if err != nil {
		e.mu.Unlock()
		return jobtype.Queue{}, err
	}
	e.queues[q.Name] = q
	e.emit(Op{Kind: OpPutQueue, Queue: &q})
	e.afterChangeLocked()
	return q, e.commit(ctx)
}

func normalQueue(q jobtype.Queue) jobtype.Queue {
	if q.Order == "" {
		q.Order = "fifo"
	}
	if q.Requires == nil {
		q.Requires = []string{}
	}
	q.Requires = slices.Clone(q.Requires)
	sort.Strings(q.Requires)
	q.Requires = slices.Compact(q.Requires)
	q.Retry = normalRetry(q.Retry)
	return q
}

// coreQueue is q as the core's QueueSpec, or a FieldError.
func coreQueue(q jobtype.Queue) (sched.QueueSpec, error) {
	order, err := parseOrder(q.Order)
	if err != nil {
		return sched.QueueSpec{}, err
	}
	if q.Batch < 0 {
		return sched.QueueSpec{}, invalid("batch", "%d is negative", q.Batch)
	}
	if q.StrictStart && order != sched.OrderStrict {
		return sched.QueueSpec{}, invalid("strictStart", "applies to strict queues only; this queue's order is %s", q.Order)
	}
	for i, c := range q.Requires {
		if c == "" {
			return sched.QueueSpec{}, invalid(fmt.Sprintf("requires[%d]", i), "empty capability")
		}
	}
	retry, err := coreRetry(q.Retry)
	if err != nil {
		return sched.QueueSpec{}, prefixed("retry", err)
	}
	return sched.QueueSpec{Name: q.Name, Priority: q.Priority, Requires: q.Requires, Order: order,
		Batch: q.Batch, Paused: !q.Active, Retry: retry, StrictStart: q.StrictStart}, nil
}

func parseOrder(s string) (sched.Order, error) {
	switch s {
	case "fifo":
		return sched.OrderFIFO, nil
	case "strict":
		return sched.OrderStrict, nil
	case "random":
		return sched.OrderRandom, nil
	}
	return 0, invalid("order", "%q is not fifo, strict or random", s)
}

// coreRetry is a normalized retry policy (normalRetry) as the core's.
func coreRetry(r jobtype.RetryPolicy) (sched.RetryPolicy, error) {
	r = normalRetry(r)
	switch {
	case r.MaxAttempts < 0 || r.MaxAttempts > 1000:
		return sched.RetryPolicy{}, invalid("maxAttempts", "%d is outside 0..1000", r.MaxAttempts)
	case r.BackoffMs < 0:
		return sched.RetryPolicy{}, invalid("backoffMs", "%d is negative", r.BackoffMs)
	case r.MaxBackoffMs < 0:
		return sched.RetryPolicy{}, invalid("maxBackoffMs", "%d is negative", r.MaxBackoffMs)
	}
	p := sched.RetryPolicy{MaxAttempts: r.MaxAttempts}
	if r.Backoff != nil {
		b, err := coreBackoff(*r.Backoff)
		if err != nil {
			return sched.RetryPolicy{}, prefixed("backoff", err)
		}
		p.Backoff, p.MaxBackoff, p.Policy, p.Jitter = b.Backoff, b.MaxBackoff, b.Policy, b.Jitter
	}
	return p, nil
}

// Queue returns one queue.
func (e *Engine) Queue(name string) (jobtype.Queue, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q, ok := e.queues[name]
	if !ok {
		return jobtype.Queue{}, notFound("", "no queue %q", name)
	}
	return q, nil
}

// Queues returns every queue, sorted by name.
func (e *Engine) Queues() []jobtype.Queue {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]jobtype.Queue, 0, len(e.queues))
	for _, q := range e.queues {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DeleteQueue removes a queue and cancels its unfinished jobs (and their
// dependants); ErrConflict while it has running jobs.
func (e *Engine) DeleteQueue(ctx context.Context, name string) error {
	return e.change(ctx, func() error {
		if err := e.idleQueueLocked(name); err != nil {
			return err
		}
		if err := e.core.RemoveQueue(name); err != nil {
			return fmt.Errorf("jobs: delete queue %q: %w", name, err)
		}
		delete(e.queues, name)
		e.emit(Op{Kind: OpDeleteQueue, Name: name})
		return nil
	})
}

// FlushQueue cancels a queue's unfinished jobs (and their dependants);
// ErrConflict while it has running jobs.
func (e *Engine) FlushQueue(ctx context.Context, name string) (int, error) {
	n := 0
	err := e.change(ctx, func() error {
		if err := e.idleQueueLocked(name); err != nil {
			return err
		}
		var ids []string
		for id, j := range e.live {
			if j.queue == name {
				ids = append(ids, id)
			}
		}
		for _, id := range ids {
			if e.live[id] != nil && e.cancelLocked(id) == nil {
				n++
			}
		}
		return nil
	})
	return n, err
}

// idleQueueLocked checks that a queue exists and runs nothing.
func (e *Engine) idleQueueLocked(name string) error {
	if _, ok := e.queues[name]; !ok {
		return notFound("", "no queue %q", name)
	}
	if n := e.runningIn(name); n > 0 {
		return conflict("", "queue %q has %d running jobs; wait for them or cancel them first", name, n)
	}
	return nil
}

func (e *Engine) runningIn(queue string) int {
	n := 0
	for _, j := range e.live {
		if j.queue == queue && j.running {
			n++
		}
	}
	return n
}

// SetKeyLimit sets the concurrency limit and the rate of a key or
// pattern, replacing what it had; limit 0 and no rate remove it. A rate
// without a burst gets the starts it allows in a second (at least 1).
func (e *Engine) SetKeyLimit(ctx context.Context, l jobtype.KeyLimit) (jobtype.KeyLimit, error) {
	if l.Pattern == "" {
		return jobtype.KeyLimit{}, invalid("pattern", "empty")
	}
	if l.Limit < 0 {
		return jobtype.KeyLimit{}, invalid("limit", "%d is negative", l.Limit)
	}
	rate, err := coreRate(&l)
	if err != nil {
		return jobtype.KeyLimit{}, err
	}
	err = e.change(ctx, func() error {
		if err := e.applyLimitLocked(l, rate); err != nil {
			return invalid("pattern", "%v", err)
		}
		e.emit(Op{Kind: OpPutLimit, Limit: &l})
		return nil
	})
	return l, err
}

// applyLimitLocked sets a checked limit in the core and the engine.
func (e *Engine) applyLimitLocked(l jobtype.KeyLimit, rate sched.Rate) error {
	if err := e.core.SetKeyLimit(l.Pattern, l.Limit); err != nil {
		return err
	}
	if err := e.core.SetKeyRate(l.Pattern, rate); err != nil {
		return err
	}
	if l.Limit == 0 && l.Rate == "" {
		delete(e.limits, l.Pattern)
	} else {
		e.limits[l.Pattern] = l
	}
	return nil
}

// coreRate checks a limit's rate and burst and gives the core's form; a
// rate without a burst gets the starts it allows in one second, at least
// 1 (l is updated), so that the delay of handing jobs out does not eat
// into the rate (docs/design.md, "Per-key rate limits").
func coreRate(l *jobtype.KeyLimit) (sched.Rate, error) {
	if l.Rate == "" {
		if l.Burst != 0 {
			return sched.Rate{}, invalid("burst", "%d needs a rate", l.Burst)
		}
		return sched.Rate{}, nil
	}
	count, per, err := jobtype.ParseRate(l.Rate)
	if err != nil {
		return sched.Rate{}, invalid("rate", "%v", err)
	}
	if l.Burst == 0 {
		l.Burst = max(1, min(sched.MaxBurst, int(int64(count)*int64(time.Second)/int64(per))))
	}
	if l.Burst < 1 || l.Burst > sched.MaxBurst {
		return sched.Rate{}, invalid("burst", "%d is outside 1..%d", l.Burst, sched.MaxBurst)
	}
	return sched.Rate{Count: count, Per: per, Burst: l.Burst}, nil
}

// KeyLimits returns every limit, sorted by pattern.
func (e *Engine) KeyLimits() []jobtype.KeyLimit {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]jobtype.KeyLimit, 0, len(e.limits))
	for _, l := range e.limits {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pattern < out[j].Pattern })
	return out
}
