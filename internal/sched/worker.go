package sched

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// worker is a backend or an agent: slots, capabilities and a lease.
type worker struct {
	id       string
	pool     *pool
	slots    int
	push     bool
	ttl      int64
	deadline int64 // lease end (ns); 0 when the lease never lapses
	jobs     []*job
	fpos     int32  // index in pool.free; -1 when absent
	lowered  uint64 // startSeq when slots last fell below running
}

func (w *worker) free() int { return w.slots - len(w.jobs) }

// pool groups workers with the same capabilities, so that a queue's
// requirements are checked once per pool rather than once per worker.
type pool struct {
	name    string
	caps    map[string]struct{}
	queues  map[string]struct{} // nil: every queue
	workers int
	pushers int
	free    []*worker // push workers with a free slot
}

func (p *pool) serves(q *queue) bool {
	if p.queues != nil {
		if _, ok := p.queues[q.spec.Name]; !ok {
			return false
		}
	}
	for _, c := range q.spec.Requires {
		if _, ok := p.caps[c]; !ok {
			return false
		}
	}
	return true
}

func (p *pool) addFree(w *worker) {
	if w.push && w.fpos < 0 && w.free() > 0 {
		w.fpos = int32(len(p.free))
		p.free = append(p.free, w)
	}
}

func (p *pool) dropFree(w *worker) {
	if w.fpos < 0 {
		return
	}
	last := len(p.free) - 1
	if int(w.fpos) != last {
		p.free[w.fpos] = p.free[last]
		p.free[w.fpos].fpos = w.fpos
	}
	p.free[last] = nil
	p.free = p.free[:last]
	w.fpos = -1
}

// AddWorker registers a worker, or updates the slots, capabilities and lease
// of a known one (its running jobs stay). Registering renews the lease.
func (s *Scheduler) AddWorker(spec WorkerSpec) error {
	if spec.ID == "" || spec.Slots < 1 || spec.LeaseTTL < 0 {
		return fmt.Errorf("%w: %q needs an id, at least 1 slot and a non-negative lease", ErrInvalidWorker, spec.ID)
	}
	w, ok := s.workers[spec.ID]
	if !ok {
		w = &worker{id: spec.ID, fpos: -1}
		s.workers[spec.ID] = w
		s.workerNames.Clear()
	} else {
		s.detach(w)
		if spec.Slots < len(w.jobs) {
			w.lowered = s.startSeq
		}
	}
	w.slots, w.push, w.ttl = spec.Slots, spec.Push, int64(spec.LeaseTTL)
	w.pool = s.poolFor(spec.Capabilities, spec.Queues)
	w.pool.workers++
	if w.push {
		w.pool.pushers++
	}
	w.pool.addFree(w)
	s.totalSlots += w.slots
	s.renew(w)
	s.recomputeTierLimits()
	return nil
}

// poolFor returns the pool of workers with these capabilities and queues.
func (s *Scheduler) poolFor(caps, queues []string) *pool {
	caps, queues = dedupe(caps), dedupe(queues)
	name := strings.Join(caps, "\x00") + "\x01" + strings.Join(queues, "\x00")
	if p, ok := s.pools[name]; ok {
		return p
	}
	p := &pool{name: name, caps: make(map[string]struct{}, len(caps))}
	for _, c := range caps {
		p.caps[c] = struct{}{}
	}
	if len(queues) > 0 {
		p.queues = make(map[string]struct{}, len(queues))
		for _, q := range queues {
			p.queues[q] = struct{}{}
		}
	}
	s.pools[name] = p
	s.poolList = append(s.poolList, p)
	return p
}

// detach takes a worker's slots out of its pool and the totals.
func (s *Scheduler) detach(w *worker) {
	p := w.pool
	p.dropFree(w)
	p.workers--
	if w.push {
		p.pushers--
	}
	s.totalSlots -= w.slots
	if p.workers == 0 {
		delete(s.pools, p.name)
		s.poolList = slices.DeleteFunc(s.poolList, func(x *pool) bool { return x == p })
	}
}

// RemoveWorker deregisters a worker. Its running jobs are released and
// retried or failed by their policy (EventRetrying or EventFailed), and
// running interactive tasks end (EventHalted).
func (s *Scheduler) RemoveWorker(id string) error {
	w, err := s.worker(id)
	if err != nil {
		return err
	}
	s.dropWorker(w)
	return nil
}

func (s *Scheduler) worker(id string) (*worker, error) {
	if w := s.workerNames.Get(id); w != nil {
		return w, nil
	}
	w, ok := s.workers[id]
	if !ok {
		return nil, fmt.Errorf("worker %q: %w", id, ErrUnknownWorker)
	}
	s.workerNames.Put(id, w)
	return w, nil
}

func (s *Scheduler) dropWorker(w *worker) {
	for len(w.jobs) > 0 {
		j := w.jobs[len(w.jobs)-1]
		id, attempt := j.id, int(j.attempt) // j may be recycled below
		s.release(j)
		if j.isInteractive() {
			s.stats.Halts++
			s.emit(Event{Kind: EventHalted, JobID: id, WorkerID: w.id, Attempt: attempt})
			s.forget(j, false)
			continue
		}
		if again, at := s.retryOrFail(j); again {
			s.emit(Event{Kind: EventRetrying, JobID: id, WorkerID: w.id, Attempt: attempt, At: at})
		} else {
			s.emit(Event{Kind: EventFailed, JobID: id, WorkerID: w.id, Attempt: attempt})
		}
	}
	s.detach(w)
	delete(s.workers, w.id)
	s.workerNames.Clear()
	s.recomputeTierLimits()
}

// Renew extends a worker's lease by its TTL from now.
func (s *Scheduler) Renew(id string) error {
	w, err := s.worker(id)
	if err != nil {
		return err
	}
	s.renew(w)
	return nil
}

func (s *Scheduler) renew(w *worker) {
	if w.ttl > 0 {
		w.deadline = s.nowNS() + w.ttl
	} else {
		w.deadline = 0
	}
}

// Tick applies the passage of time: workers whose lease lapsed are removed
// (EventLeaseExpired, then their jobs are retried or failed), retries
// whose backoff ended and scheduled jobs now due join their queues, jobs
// not started by their deadline are cancelled (EventExpired), and jobs
// held at a queue's head for a key's token come back when it is due. Call
// it at NextDeadline, then Dispatch.
func (s *Scheduler) Tick() {
	now := s.nowNS()
	var lapsed []*worker
	for _, w := range s.workers {
		if w.deadline != 0 && w.deadline <= now {
			lapsed = append(lapsed, w)
		}
	}
	slices.SortFunc(lapsed, func(a, b *worker) int { return strings.Compare(a.id, b.id) })
	for _, w := range lapsed {
		s.stats.LeaseExpiries++
		s.emit(Event{Kind: EventLeaseExpired, WorkerID: w.id})
		s.dropWorker(w)
	}
	s.expireLimits(now)
	s.wakeDelayed(now)
	s.expireDeadlines(now)
	s.openDue(now)
}

// NextDeadline returns when Tick next has work: the earliest lease end,
// retry or scheduled job's wake-up, deadline, time limit or token due for
// a key whose job waits for it. It returns the zero time when there is none.
func (s *Scheduler) NextDeadline() time.Time {
	var next int64
	for _, w := range s.workers {
		if w.deadline != 0 && (next == 0 || w.deadline < next) {
			next = w.deadline
		}
	}
	if len(s.delayed) > 0 {
		if at := int64(s.delayed[0].key); next == 0 || at < next {
			next = at
		}
	}
	if len(s.deadlines) > 0 {
		if at := s.deadlines[0].at; next == 0 || at < next {
			next = at
		}
	}
	if at := s.nextLimit(); at != 0 && (next == 0 || at < next) {
		next = at
	}
	if len(s.rateWake) > 0 {
		if at := s.rateWake[0].at; next == 0 || at < next {
			next = at
		}
	}
	if next == 0 {
		return time.Time{}
	}
	return time.Unix(0, next)
}
