package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

type jobState uint8

const (
	stateWaiting jobState = iota + 1 // dependencies pending
	stateDelayed                     // waiting out a retry backoff
	stateQueued                      // ready, in its queue
	stateRunning
	stateDone // finished; kept only while an upstream job still links to it
)

const (
	flagDefault uint8 = 1 << iota
	flagInteractive
	flagRunAfterFailure
)

// job is the core's record of a job. Rare parts (dependency links, the
// running attempt) hang off pointers so that a queued job stays small.
type job struct {
	id      string
	key     uint64 // sort key while queued; ready time while delayed
	queue   *queue
	bucket  *bucket
	deps    *depInfo
	run     *runInfo
	retry   *RetryPolicy // nil: the queue's policy
	hidx    int32        // index in the heap that holds the job
	attempt uint16
	prio    int16
	tier    int8 // fixed tier, or 0 (queued as fast) for default tasks
	state   jobState
	flags   uint8
}

// depInfo links a job into its workflow.
type depInfo struct {
	pending    int32 // upstream jobs not finished yet
	dependants []*job
}

// runInfo is the running attempt of a job.
type runInfo struct {
	worker   *worker
	started  int64
	startSeq uint64
	tier     int8
	wpos     int32 // index in worker.jobs
	cpos     int32 // index in the running set of its class
}

func (j *job) isDefault() bool     { return j.flags&flagDefault != 0 }
func (j *job) isInteractive() bool { return j.flags&flagInteractive != 0 }

func (j *job) policy() RetryPolicy {
	if j.retry != nil {
		return *j.retry
	}
	return j.queue.spec.Retry
}

// validateJob checks a spec against the scheduler's configuration. known
// says whether a dependency id is acceptable.
func (s *Scheduler) validateJob(sp *JobSpec, known func(string) bool) error {
	if sp.ID == "" {
		return fmt.Errorf("%w: empty id", ErrInvalidJob)
	}
	if s.jobs.get(sp.ID) != nil {
		return fmt.Errorf("job %q: %w", sp.ID, ErrDuplicateJob)
	}
	if _, ok := s.queues[sp.Queue]; !ok {
		return fmt.Errorf("job %q: queue %q: %w", sp.ID, sp.Queue, ErrUnknownQueue)
	}
	if !sp.Default && (sp.Tier < 0 || sp.Tier >= len(s.tiers)) {
		return fmt.Errorf("%w: job %q: tier %d outside 0..%d", ErrInvalidJob, sp.ID, sp.Tier, len(s.tiers)-1)
	}
	if sp.Priority < math.MinInt16 || sp.Priority > math.MaxInt16 {
		return fmt.Errorf("%w: job %q: priority %d outside %d..%d", ErrInvalidJob, sp.ID, sp.Priority, math.MinInt16, math.MaxInt16)
	}
	if sp.Mode > ModeWrite {
		return fmt.Errorf("%w: job %q: unknown mode %d", ErrInvalidJob, sp.ID, sp.Mode)
	}
	for _, k := range sp.Keys {
		if k == "" || strings.IndexByte(k, 0) >= 0 {
			return fmt.Errorf("%w: job %q: key %q is empty or holds a NUL byte", ErrInvalidJob, sp.ID, k)
		}
	}
	if strings.IndexByte(sp.Group, 0) >= 0 {
		return fmt.Errorf("%w: job %q: group holds a NUL byte", ErrInvalidJob, sp.ID)
	}
	if err := validateRetry(sp.Retry); err != nil {
		return fmt.Errorf("job %q: %w", sp.ID, err)
	}
	for _, d := range sp.After {
		if d == sp.ID {
			return &CycleError{Job: sp.ID, Cycle: []string{sp.ID}}
		}
		if !known(d) {
			return fmt.Errorf("job %q: dependency %q: %w", sp.ID, d, ErrUnknownDependency)
		}
	}
	return nil
}

func validateRetry(p *RetryPolicy) error {
	if p == nil {
		return nil
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > math.MaxUint16 || p.Backoff < 0 || p.MaxBackoff < 0 {
		return fmt.Errorf("%w: retry policy needs 0..%d attempts and non-negative backoffs", ErrInvalidJob, math.MaxUint16)
	}
	return nil
}

// newJob builds the job record; it does not link dependencies or queue it.
func (s *Scheduler) newJob(sp *JobSpec) *job {
	q := s.queues[sp.Queue]
	j := s.allocJob()
	*j = job{id: sp.ID, queue: q, hidx: -1, prio: int16(sp.Priority)}
	if sp.Default {
		j.flags |= flagDefault
	} else {
		j.tier = int8(sp.Tier)
	}
	if sp.RunAfterFailure {
		j.flags |= flagRunAfterFailure
	}
	if sp.Retry != nil {
		p := *sp.Retry
		j.retry = &p
	}
	j.bucket = s.bucketFor(q, sp.Keys, sp.Group, sp.Mode)
	s.refBucket(j.bucket)
	s.jobs.put(j)
	return j
}

// makeReady puts a job whose dependencies are done at the back of its queue.
func (s *Scheduler) makeReady(j *job) {
	j.key = sortKey(j.queue.orderPrio(j), s.nextSeq())
	s.enqueue(j)
}

// forget drops a finished job and tells its dependants.
func (s *Scheduler) forget(j *job, ok bool) {
	j.state = stateDone
	s.jobs.remove(j.id)
	s.releaseBucket(j.bucket)
	if j.deps != nil {
		s.propagate(j, ok)
		return
	}
	s.recycle(j)
}

// maxFreeJobs bounds the job records kept for reuse.
const maxFreeJobs = 1024

// recycle keeps a finished job's record for reuse, which spares the
// allocator and the garbage collector one object per job. Only jobs without
// dependency links are recycled: nothing else points at a finished job.
func (s *Scheduler) recycle(j *job) {
	if len(s.freeJobs) < maxFreeJobs {
		*j = job{state: stateDone}
		s.freeJobs = append(s.freeJobs, j)
	}
}

func (s *Scheduler) allocJob() *job {
	if n := len(s.freeJobs); n > 0 {
		j := s.freeJobs[n-1]
		s.freeJobs[n-1] = nil
		s.freeJobs = s.freeJobs[:n-1]
		return j
	}
	return new(job)
}

// retryOrFail decides the fate of an attempt that did not succeed; the job
// is no longer running. It returns whether the job runs again and when.
func (s *Scheduler) retryOrFail(j *job) (bool, time.Time) {
	p := j.policy()
	if int(j.attempt) >= max(1, p.MaxAttempts) {
		s.stats.Failed++
		s.forget(j, false)
		return false, time.Time{}
	}
	s.stats.Retried++
	wait := backoff(p, int(j.attempt))
	if wait <= 0 {
		s.makeReady(j)
		return true, s.now()
	}
	at := s.now().Add(wait)
	j.state = stateDelayed
	j.queue.delayed++
	s.delayed.push(uint64(at.UnixNano()), j)
	return true, at
}

func backoff(p RetryPolicy, attempt int) time.Duration {
	if p.Backoff <= 0 {
		return 0
	}
	d := p.Backoff
	for i := 1; i < attempt && (p.MaxBackoff <= 0 || d < p.MaxBackoff) && d < time.Hour*24*365; i++ {
		d *= 2
	}
	if p.MaxBackoff > 0 && d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	return d
}

// wakeDelayed moves retries whose backoff ended back into their queues.
func (s *Scheduler) wakeDelayed(now int64) {
	for len(s.delayed) > 0 && int64(s.delayed[0].key) <= now {
		j := s.delayed.remove(0)
		j.queue.delayed--
		s.makeReady(j)
	}
}

func dedupe(xs []string) []string {
	if len(xs) < 2 {
		return xs
	}
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
