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

// job is the core's record of a job. Records live in a jobTable, 64 bytes
// each, so that what a step reads of a job shares one cache line;
// everything else refers to a job by its 32-bit slot. Rare parts
// (dependency links, an own retry policy) hang off ext.
//
// pos depends on the state: a queued job of a FIFO queue sits in its
// bucket's list (pos is the previous job's slot, next the next one's, and
// nextKey the next one's sort key, so that taking the first job out tells
// the key of the new first without reading its record); any other queued
// or delayed job sits in a heap or set at index pos; a running job's
// attempt is runs[pos].
type job struct {
	id      string
	key     uint64 // sort key while queued; ready time while delayed
	nextKey uint64 // FIFO list: sort key of the next job
	bucket  *bucket
	slot    uint32 // the job's number in the table
	pos     int32
	next    uint32 // FIFO list: the next job's slot, or noSlot
	ext     uint32 // index in jobTable.exts; 0: none
	attempt uint16
	prio    int16
	tier    int8 // fixed tier, or 0 (queued as fast) for default tasks
	state   jobState
	flags   uint8
	gen     uint8 // the slot's generation (see jobTable)
}

// noSlot marks the end of a FIFO list.
const noSlot = ^uint32(0)

// jobExt holds the rare parts of a job: its workflow links and its own
// retry policy.
type jobExt struct {
	pending    int32     // upstream jobs not finished yet
	dependants []depLink // downstream jobs
	retry      *RetryPolicy
	notBefore  int64         // UnixNano: a waiting job's NotBefore, applied once its dependencies are done
	dpos       int32         // index+1 in the deadline heap; 0: none
	timeout    time.Duration // own time limit; 0: the tier's
	backoff    *RetryPolicy  // own backoff over the policy's
}

// depLink names a downstream job. Its slot may be reused once that job is
// gone; ext tells the job it meant from a later one.
type depLink struct {
	ext  *jobExt
	slot uint32
}

// runInfo is the running attempt of a job.
type runInfo struct {
	worker   *worker
	started  int64
	startSeq uint64
	job      uint32 // slot
	tier     int8
	wpos     int32 // index in worker.jobs
	cpos     int32 // index in the running set of its class
	limitAt  int64 // when the attempt fails by its time limit (ns); 0: never
	// unconfirmed: started from a StrictStart queue, not yet confirmed.
	unconfirmed bool
}

func (j *job) isDefault() bool     { return j.flags&flagDefault != 0 }
func (j *job) isInteractive() bool { return j.flags&flagInteractive != 0 }

func (j *job) queue() *queue { return j.bucket.queue }

func (s *Scheduler) policy(j *job) RetryPolicy {
	p := j.queue().spec.Retry
	x := s.jobs.ext(j)
	if x == nil {
		return p
	}
	if x.retry != nil {
		p = *x.retry
	}
	if b := x.backoff; b != nil {
		p.Backoff, p.MaxBackoff, p.Policy, p.Jitter = b.Backoff, b.MaxBackoff, b.Policy, b.Jitter
	}
	return p
}

// validateJob checks a spec against the scheduler's configuration. known
// says whether a dependency id is acceptable.
func (s *Scheduler) validateJob(sp *JobSpec, known func(string) bool) error {
	if sp.ID == "" {
		return fmt.Errorf("%w: empty id", ErrInvalidJob)
	}
	if s.jobs.get(sp.ID) != nil {
		return duplicate(sp.ID)
	}
	return s.checkSpec(sp, known)
}

func duplicate(id string) error { return fmt.Errorf("job %q: %w", id, ErrDuplicateJob) }

// checkSpec is validateJob but for the id, which it does not check.
func (s *Scheduler) checkSpec(sp *JobSpec, known func(string) bool) error {
	if _, ok := s.queues[sp.Queue]; !ok {
		return fmt.Errorf("job %q: queue %q: %w", sp.ID, sp.Queue, ErrUnknownQueue)
	}
	return s.checkFields(sp, known)
}

// checkFields is checkSpec but for the queue, which it does not check.
func (s *Scheduler) checkFields(sp *JobSpec, known func(string) bool) error {
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
	if sp.Group != "" && strings.IndexByte(sp.Group, 0) >= 0 {
		return fmt.Errorf("%w: job %q: group holds a NUL byte", ErrInvalidJob, sp.ID)
	}
	if err := validateRetry(sp.Retry); err != nil {
		return fmt.Errorf("job %q: %w", sp.ID, err)
	}
	if err := validateRetry(sp.Backoff); err != nil {
		return fmt.Errorf("job %q: backoff: %w", sp.ID, err)
	}
	if sp.Timeout < 0 {
		return fmt.Errorf("%w: job %q: negative timeout %s", ErrInvalidJob, sp.ID, sp.Timeout)
	}
	if sp.Attempts < 0 || sp.Attempts >= math.MaxUint16 {
		return fmt.Errorf("%w: job %q: attempts %d outside 0..%d", ErrInvalidJob, sp.ID, sp.Attempts, math.MaxUint16-1)
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
	return validateBackoff(p)
}

// newJob builds the job record; it does not link dependencies or queue it.
func (s *Scheduler) newJob(sp *JobSpec) *job {
	b := s.bucketFor(s.queues[sp.Queue], sp.Keys, sp.Group, sp.Mode, specTier(sp), int16(sp.Priority))
	return s.newJobIn(sp, b, s.jobs.hash(sp.ID))
}

// specTier is the tier a job queues in: its own, or 0 for default tasks.
func specTier(sp *JobSpec) int8 {
	if sp.Default {
		return 0
	}
	return int8(sp.Tier)
}

// newJobIn builds the record of a job of bucket b whose id hashes to h.
func (s *Scheduler) newJobIn(sp *JobSpec, b *bucket, h uint64) *job {
	j := s.jobs.alloc()
	j.id, j.pos, j.prio, j.tier, j.bucket = sp.ID, -1, int16(sp.Priority), specTier(sp), b
	j.attempt = uint16(sp.Attempts)
	if sp.Default {
		j.flags |= flagDefault
	}
	if sp.RunAfterFailure {
		j.flags |= flagRunAfterFailure
	}
	if sp.Retry != nil {
		p := *sp.Retry
		s.jobs.addExt(j).retry = &p
	}
	if sp.Timeout > 0 {
		s.jobs.addExt(j).timeout = sp.Timeout
	}
	if sp.Backoff != nil {
		p := *sp.Backoff
		s.jobs.addExt(j).backoff = &p
	}
	s.refBucket(b)
	s.jobs.put(j, h)
	return j
}

// makeReady puts a job whose dependencies are done at the back of its queue.
func (s *Scheduler) makeReady(j *job) {
	j.key = sortKey(j.queue().orderPrio(j), s.nextSeq())
	s.enqueue(j)
}

// forget drops a finished job, tells its dependants and frees its slot.
func (s *Scheduler) forget(j *job, ok bool) {
	j.state = stateDone
	s.dropDeadline(j)
	s.jobs.remove(j)
	s.releaseBucket(j.bucket)
	if x := s.jobs.ext(j); x != nil && len(x.dependants) > 0 {
		s.propagate(x, ok)
	}
	s.jobs.release(j)
}

// retryOrFail decides the fate of an attempt that did not succeed; the job
// is no longer running. It returns whether the job runs again and when.
func (s *Scheduler) retryOrFail(j *job) (bool, time.Time) {
	p := s.policy(j)
	if int(j.attempt) >= max(1, p.MaxAttempts) {
		s.stats.Failed++
		s.forget(j, false)
		return false, time.Time{}
	}
	s.stats.Retried++
	wait := s.backoff(p, int(j.attempt))
	if wait <= 0 {
		s.makeReady(j)
		return true, s.now()
	}
	at := s.now().Add(wait)
	s.delay(j, at)
	return true, at
}

// delay makes j wait until at before it joins its queue.
func (s *Scheduler) delay(j *job, at time.Time) {
	j.state = stateDelayed
	j.queue().delayed++
	s.delayed.push(&s.jobs, uint64(at.UnixNano()), j)
}

// readyOrDelay makes a new job ready, or delays it until notBefore when
// that is still to come.
func (s *Scheduler) readyOrDelay(j *job, notBefore time.Time) {
	if !notBefore.IsZero() && notBefore.After(s.now()) {
		s.delay(j, notBefore)
		return
	}
	s.makeReady(j)
}

// wakeDelayed moves retries whose backoff ended back into their queues.
func (s *Scheduler) wakeDelayed(now int64) {
	for len(s.delayed) > 0 && int64(s.delayed[0].key) <= now {
		j := s.delayed.remove(&s.jobs, 0)
		j.queue().delayed--
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
