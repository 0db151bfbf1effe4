package sched

import (
	"fmt"
	"time"
)

// Adopt records a job that is already running on a worker, in the given
// tier, since started: a driver that rebuilds its state from a store after
// a restart or a failover gives back what was running. The job counts
// toward its worker's slots and the tier limits from now on; if adopting it
// takes a worker or a tier past its limit (the store says so), the excess
// is treated as a limit lowered under load: it only forbids new starts.
//
// spec.Default marks a default task, which may hold any tier (a downgraded
// one holds a faster tier than it started in); otherwise tier must be
// spec.Tier. Adopted jobs take no dependencies, keys, group or mode. A
// start time in the future is taken as now. The returned Assignment is the
// one the job got when it started; Complete takes its Attempt.
func (s *Scheduler) Adopt(spec JobSpec, workerID string, tier int, started time.Time) (Assignment, error) {
	if !spec.Default && tier != spec.Tier {
		return Assignment{}, fmt.Errorf("%w: job %q of tier %d cannot hold tier %d", ErrInvalidJob, spec.ID, spec.Tier, tier)
	}
	if tier < 0 || tier >= len(s.tiers) {
		return Assignment{}, fmt.Errorf("%w: job %q: tier %d outside 0..%d", ErrInvalidJob, spec.ID, tier, len(s.tiers)-1)
	}
	return s.adopt(spec, workerID, tier, started, 0)
}

// AdoptInteractive is Adopt for an interactive task (see StartInteractive):
// it runs in tier 0 and may be halted for queued work as any other.
func (s *Scheduler) AdoptInteractive(spec JobSpec, workerID string, started time.Time) (Assignment, error) {
	spec.Default, spec.Tier = false, 0
	return s.adopt(spec, workerID, 0, started, flagInteractive)
}

func (s *Scheduler) adopt(spec JobSpec, workerID string, tier int, started time.Time, flags uint8) (Assignment, error) {
	if err := s.validateJob(&spec, func(string) bool { return false }); err != nil {
		return Assignment{}, err
	}
	if len(spec.After) > 0 || len(spec.Keys) > 0 || spec.Group != "" || spec.Mode != ModeNone {
		return Assignment{}, fmt.Errorf("%w: adopted job %q takes no dependencies, keys, group or mode", ErrInvalidJob, spec.ID)
	}
	w, err := s.worker(workerID)
	if err != nil {
		return Assignment{}, fmt.Errorf("adopt job %q: %w", spec.ID, err)
	}
	j := s.newJob(&spec)
	j.flags |= flags
	var a Assignment
	s.start(j, j.bucket, w, &a)
	if a.Tier != tier {
		s.setRunTier(j, tier)
		a.Tier, a.Duration = tier, s.tiers[tier].Duration
	}
	if at := started.UnixNano(); at < s.nowNS() {
		s.run(j).started = at
	}
	s.setLimit(j)
	s.markAdoptedExcess(w)
	return a, nil
}

// markAdoptedExcess records a worker or tier taken past its limit by an
// adoption as lowered under load now, so that the excess forbids new
// starts without breaking the invariants.
func (s *Scheduler) markAdoptedExcess(w *worker) {
	if w.free() < 0 {
		w.lowered = s.startSeq
	}
	for k := 1; k < len(s.tiers); k++ {
		if s.count(k) > s.limits[k] {
			s.tierLow[k] = s.startSeq
		}
	}
}
