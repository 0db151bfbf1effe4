package sched

import (
	"errors"
	"fmt"
	"time"
)

// Scheduled jobs and deadlines (docs/design.md, "Scheduled jobs and
// deadlines"). A job whose JobSpec.NotBefore is still to come waits in the
// delayed heap, as a retry waiting out its backoff does; a job with
// dependencies keeps its NotBefore in its rare parts and waits for it once
// they are done. A job with a Deadline sits in the deadline heap until it
// starts (its first attempt) or leaves: Tick, and Pull and Dispatch before
// they pick work, cancel every job whose deadline came with EventExpired.
// Both heaps feed NextDeadline, so the driver sleeps until the earliest.

// ErrNotDelayed refuses RunNow for a job that is not waiting for its time.
var ErrNotDelayed = errors.New("job is not waiting for its time")

// deadlineHeap orders jobs with a deadline by it. An entry's index, plus
// one, is kept in the job's rare parts (jobExt.dpos) so that a job that
// starts or leaves is taken out in O(log n).
type deadlineHeap []deadlineEntry

type deadlineEntry struct {
	at   int64
	slot uint32
}

func (h deadlineHeap) set(t *jobTable, i int) {
	t.ext(t.At(h[i].slot)).dpos = int32(i + 1)
}

func (h *deadlineHeap) push(t *jobTable, at int64, j *job) {
	*h = append(*h, deadlineEntry{at, j.slot})
	h.up(t, len(*h)-1)
}

func (h *deadlineHeap) remove(t *jobTable, i int) {
	old := *h
	t.ext(t.At(old[i].slot)).dpos = 0
	n := len(old) - 1
	if i != n {
		old[i] = old[n]
		old.set(t, i)
	}
	*h = old[:n]
	if i < n && !h.down(t, i) {
		h.up(t, i)
	}
}

func (h deadlineHeap) up(t *jobTable, i int) {
	e := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= e.at {
			break
		}
		h[i] = h[p]
		h.set(t, i)
		i = p
	}
	h[i] = e
	h.set(t, i)
}

func (h deadlineHeap) down(t *jobTable, i0 int) bool {
	e := h[i0]
	i, n := i0, len(h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h[c+1].at < h[c].at {
			c++
		}
		if h[c].at >= e.at {
			break
		}
		h[i] = h[c]
		h.set(t, i)
		i = c
	}
	h[i] = e
	h.set(t, i)
	return i > i0
}

// admit files a new job: its deadline, then ready or delayed until
// NotBefore. A job with pending dependencies keeps NotBefore for later.
func (s *Scheduler) admit(j *job, sp *JobSpec) {
	if !sp.Deadline.IsZero() {
		s.jobs.addExt(j) // the heap keeps the entry's index there
		s.deadlines.push(&s.jobs, sp.Deadline.UnixNano(), j)
	}
	if x := s.jobs.ext(j); x != nil && x.pending > 0 {
		if !sp.NotBefore.IsZero() {
			x.notBefore = sp.NotBefore.UnixNano()
		}
		j.state = stateWaiting
		j.queue().waiting++
		return
	}
	s.readyOrDelay(j, sp.NotBefore)
}

// dependenciesDone readies a waiting job whose last dependency finished,
// or delays it until its NotBefore.
func (s *Scheduler) dependenciesDone(j *job, x *jobExt) {
	if x.notBefore != 0 {
		s.readyOrDelay(j, time.Unix(0, x.notBefore))
		return
	}
	s.makeReady(j)
}

// dropDeadline takes a job that starts or leaves out of the deadline heap.
func (s *Scheduler) dropDeadline(j *job) {
	if j.ext == 0 {
		return
	}
	if x := s.jobs.ext(j); x.dpos != 0 {
		s.deadlines.remove(&s.jobs, int(x.dpos-1))
	}
}

// expireDeadlines cancels the jobs whose deadline came before they started,
// announcing each with EventExpired (and its dependants' cancellations
// with EventCancelled, as for any cancellation).
func (s *Scheduler) expireDeadlines(now int64) {
	for len(s.deadlines) > 0 && s.deadlines[0].at <= now {
		j := s.jobs.At(s.deadlines[0].slot)
		s.deadlines.remove(&s.jobs, 0)
		s.emit(Event{Kind: EventExpired, JobID: j.id, At: time.Unix(0, now)})
		s.stats.Expired++
		s.cancel(j, false)
	}
}

// expireDue is expireDeadlines for Pull and Dispatch: nothing starts after
// its deadline even when Tick runs late.
func (s *Scheduler) expireDue() {
	if len(s.deadlines) > 0 {
		s.expireDeadlines(s.nowNS())
	}
}

// RunNow makes a job that waits for its time (a scheduled job not yet due,
// or a retry waiting out its backoff) ready now, at the back of its queue.
// Any other job is refused with ErrNotDelayed.
func (s *Scheduler) RunNow(id string) error {
	j := s.jobs.get(id)
	if j == nil {
		return fmt.Errorf("job %q: %w", id, ErrUnknownJob)
	}
	if j.state != stateDelayed {
		return fmt.Errorf("job %q: %w", id, ErrNotDelayed)
	}
	s.delayed.remove(&s.jobs, int(j.pos))
	j.queue().delayed--
	s.makeReady(j)
	return nil
}
