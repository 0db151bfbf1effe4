package sched

// Strict start (docs/design.md, "Exclusive read/write groups and strict
// order"): a strict queue with StrictStart hands out its next job only once
// the worker holding the one before confirmed that it started, so that two
// workers holding consecutive jobs cannot start them out of order. An
// attempt that ends unconfirmed — completed, released, its lease lapsed,
// cancelled — opens the gate as well.

// startGated says whether the queue's head must wait for a start to be
// confirmed.
func (q *queue) startGated() bool { return q.spec.StrictStart && q.unconfirmed > 0 }

// Confirm records that the worker running attempt attempt of job id
// started it. It reports whether that is the job's running attempt; a
// repeated confirmation, or one for an attempt that ended, changes nothing.
// The driver then runs Dispatch (or serves waiting pulls): the queue's next
// job may start now.
func (s *Scheduler) Confirm(id string, attempt int) bool {
	j := s.runningJob(id)
	if j == nil || int(j.attempt) != attempt {
		return false
	}
	if r := s.run(j); r.unconfirmed {
		r.unconfirmed = false
		j.queue().unconfirmed--
	}
	return true
}
