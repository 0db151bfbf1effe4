package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// outcome is what became of an execution's completion report.
type outcome uint8

const (
	// accepted: the server acknowledged the report and did not ignore it.
	accepted outcome = iota + 1
	// ignored: the server ignored the report, and no earlier try of it went
	// unanswered (so no other server can have accepted it).
	ignored
	// uncertain: the report went unanswered at least once (the server was
	// killed), and a later try was ignored: the killed server may have
	// accepted it, or may have died before it was durable.
	uncertain
	// dropped: the agent's lease lapsed while the job ran; it sent no report.
	dropped
)

func (o outcome) String() string {
	return [...]string{"?", "accepted", "ignored", "uncertain", "dropped"}[o]
}

// execution is one run of a job attempt as an agent saw it, timed by the
// agent: start when the lease answer arrived, end before it reported.
type execution struct {
	job     string
	attempt int
	agent   string
	queue   string
	payload payload
	start   time.Duration // since the test's epoch
	end     time.Duration
	outcome outcome
}

type leasedJob struct {
	ID      string          `json:"id"`
	Queue   string          `json:"queue"`
	Attempt int             `json:"attempt"`
	Payload json.RawMessage `json:"payload"`
}

type leaseAnswer struct {
	Jobs    []leasedJob `json:"jobs"`
	LeaseMs int64       `json:"leaseMs"`
}

type jobAttempt struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
}

type renewAnswer struct {
	Stop     []jobAttempt `json:"stop"`
	Timeouts []jobAttempt `json:"timeouts"`
}

type ack struct {
	ID       string `json:"id"`
	Ignored  bool   `json:"ignored"`
	Retrying bool   `json:"retrying"`
}

// agent runs jobs like a real agent would, except that a job is a sleep of
// 0-5 ms: it leases with waitMs, renews, reports success, and survives
// server restarts.
type agent struct {
	name  string
	caps  []string
	slots int
	c     *client
	epoch time.Time
	done  func() // one more job's report was accepted

	// stall is held while the agent is frozen: it makes no call then.
	stall sync.RWMutex

	mu      sync.Mutex
	running int
	held    map[jobAttempt]bool // leased and not yet reported
	freed   chan struct{}       // a slot freed (buffered, 1)
	leases  int                 // lease answers received so far
	lapsed  int                 // jobs of lease answers up to this one are lost
	execs   []execution
	stops   []jobAttempt // stop or timeout orders (none expected)
	err     error        // the first unexpected answer
	lost    int          // renewals answered 404
}

func newAgent(name string, caps []string, slots int, c *client, epoch time.Time, done func()) *agent {
	return &agent{name: name, caps: caps, slots: slots, c: c, epoch: epoch, done: done, freed: make(chan struct{}, 1),
		held: map[jobAttempt]bool{}}
}

// run leases and runs jobs until ctx ends, then leaves.
func (a *agent) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() { defer wg.Done(); a.renewLoop(ctx) }()
	defer a.leave(ctx)
	unsure := true // of what the server has leased to it: say what it holds
	for ctx.Err() == nil && a.failed() == nil {
		free := a.freeSlots()
		if free == 0 {
			select {
			case <-a.freed:
			case <-ctx.Done():
			}
			continue
		}
		a.awake()
		var ans leaseAnswer
		req := map[string]any{"agent": a.name, "capabilities": a.caps, "slots": a.slots, "max": free, "waitMs": 1000}
		if unsure {
			// A lease answer may have been lost (a server died while
			// sending it): the protocol's holding list lets the server
			// hand back whatever it leased that the agent never got.
			req["holding"] = a.holding()
		}
		missed, err := a.c.do(ctx, "POST", "/v1/agent/lease", req, &ans, 200)
		if err != nil {
			a.fail(ctx, err)
			continue
		}
		unsure = missed
		a.start(ctx, wg, ans.Jobs)
	}
}

// leave tells the server the agent is gone, once ctx ended (the test's
// end): its lease need not lapse.
func (a *agent) leave(ctx context.Context) {
	if ctx.Err() == nil {
		return // it stopped on an error; the test fails anyway
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := a.c.call(ctx, "POST", "/v1/agent/leave", map[string]string{"agent": a.name}, nil, 204); err != nil {
		a.mu.Lock()
		a.err = fmt.Errorf("agent %s: %w", a.name, err)
		a.mu.Unlock()
	}
}

// start runs the leased jobs, each in a goroutine of its own.
func (a *agent) start(ctx context.Context, wg *sync.WaitGroup, jobs []leasedJob) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.leases++
	for _, j := range jobs {
		a.running++
		a.held[jobAttempt{ID: j.ID, Attempt: j.Attempt}] = true
		wg.Add(1)
		go func(lease int) { defer wg.Done(); a.execute(ctx, j, lease) }(a.leases)
	}
}

func (a *agent) freeSlots() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.slots - a.running
}

// execute "runs" a job for 0-5 ms, then reports success unless the lease
// it came with lapsed meanwhile.
func (a *agent) execute(ctx context.Context, j leasedJob, lease int) {
	defer a.release(j)
	ex := execution{job: j.ID, attempt: j.Attempt, agent: a.name, queue: j.Queue, start: time.Since(a.epoch)}
	if err := json.Unmarshal(j.Payload, &ex.payload); err != nil {
		a.fail(ctx, fmt.Errorf("job %s: payload %q: %w", j.ID, j.Payload, err))
	}
	time.Sleep(rand.N(5*time.Millisecond + 1)) // the job's work
	ex.end = time.Since(a.epoch)
	a.awake()
	if a.lapsedLease(lease) {
		ex.outcome = dropped
	} else {
		ex.outcome = a.complete(ctx, j)
	}
	a.mu.Lock()
	a.execs = append(a.execs, ex)
	a.mu.Unlock()
	if ex.outcome == accepted {
		a.done()
	}
}

// holding lists the jobs the agent holds.
func (a *agent) holding() []jobAttempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []jobAttempt{}
	for h := range a.held {
		out = append(out, h)
	}
	return out
}

func (a *agent) release(j leasedJob) {
	a.mu.Lock()
	delete(a.held, jobAttempt{ID: j.ID, Attempt: j.Attempt})
	a.running--
	a.mu.Unlock()
	select {
	case a.freed <- struct{}{}:
	default:
	}
}

func (a *agent) lapsedLease(lease int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return lease <= a.lapsed
}

// complete reports success until some server answers.
func (a *agent) complete(ctx context.Context, j leasedJob) outcome {
	var ans struct {
		Acks []ack `json:"acks"`
	}
	req := map[string]any{"agent": a.name, "results": []any{map[string]any{"id": j.ID, "attempt": j.Attempt, "exitCode": 0, "output": "ok"}}}
	missed, err := a.c.do(ctx, "POST", "/v1/agent/complete", req, &ans, 200)
	switch {
	case err != nil:
		a.fail(ctx, err)
		return uncertain
	case len(ans.Acks) != 1 || ans.Acks[0].ID != j.ID || ans.Acks[0].Retrying:
		a.fail(ctx, fmt.Errorf("complete %s attempt %d: acks %+v; want one for the job, not retrying", j.ID, j.Attempt, ans.Acks))
		return uncertain
	case !ans.Acks[0].Ignored:
		return accepted
	case missed:
		return uncertain
	}
	return ignored
}

// renewLoop renews the lease every quarter of the lease time.
func (a *agent) renewLoop(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a.awake()
		a.renew(ctx)
	}
}

// renew renews the lease once. A 404 means the lease lapsed (or the server
// restarted): the jobs of every lease answer received before the renewal
// was sent are lost. Jobs of an answer that arrived after it was sent are
// not: that lease request may have registered the agent again after the
// renewal found it unknown.
func (a *agent) renew(ctx context.Context) {
	a.mu.Lock()
	before := a.leases
	a.mu.Unlock()
	var ans renewAnswer
	err := a.c.call(ctx, "POST", "/v1/agent/renew", map[string]string{"agent": a.name}, &ans, 200)
	var se *statusError
	switch {
	case err == nil:
		a.mu.Lock()
		a.stops = append(append(a.stops, ans.Stop...), ans.Timeouts...)
		a.mu.Unlock()
	case errors.As(err, &se) && se.status == 404:
		a.mu.Lock()
		a.lost++
		a.lapsed = max(a.lapsed, before)
		a.mu.Unlock()
	case errors.Is(err, errUnreachable):
	default:
		a.fail(ctx, err)
	}
}

// awake returns at once, or when the agent thaws if it is frozen.
func (a *agent) awake() {
	a.stall.RLock()
	defer a.stall.RUnlock()
}

// freeze stops the agent from making any call for d, as if its process
// were stopped (SIGSTOP, a long pause): when d exceeds the lease, the
// lease lapses and the server hands its running jobs to other agents.
// When it thaws, its renewal timer fires first: the renewal finds the
// lease lapsed, and the agent drops the jobs it ran meanwhile.
func (a *agent) freeze(ctx context.Context, d time.Duration) {
	a.stall.Lock()
	defer a.stall.Unlock()
	select { // the test's input: how long the agent is gone
	case <-time.After(d):
	case <-ctx.Done():
		return
	}
	a.renew(ctx)
}

// fail records the first unexpected answer; the test stops on it. Errors
// after ctx ended are the test shutting down.
func (a *agent) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = fmt.Errorf("agent %s: %w", a.name, err)
	}
}

func (a *agent) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}
