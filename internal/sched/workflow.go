package sched

import "fmt"

// Workflows (docs/design.md, "Workflows"): a job is ready when every upstream
// job has succeeded. When an upstream job fails past its retries or is
// cancelled, its dependants are cancelled, except those marked RunAfterFailure,
// which count it as finished. A workflow is submitted whole or not at all, and
// a cycle is refused.

// Submit adds one job. Its dependencies must be jobs the scheduler knows
// (not yet finished); a job whose dependencies finished earlier is submitted
// without them.
func (s *Scheduler) Submit(spec JobSpec) error {
	if len(spec.After) > 0 {
		return s.SubmitWorkflow([]JobSpec{spec}, nil)
	}
	q := s.queue(spec.Queue)
	if spec.ID == "" || q == nil || s.checkFields(&spec, nil) != nil {
		return s.validateJob(&spec, nil) // the first error, in its usual order
	}
	// The duplicate check and the bucket lookup each start with a cache
	// line that, with a million jobs queued, is rarely in cache: load the
	// two together, so that their misses overlap, and look the bucket up
	// (it reads its record, another likely miss) before the duplicate
	// check branches on the index line, so that a mispredicted branch
	// there does not throw that work away.
	keys := dedupe(spec.Keys)
	sig := signature(keys, spec.Group, spec.Mode)
	tier, prio := specTier(&spec), bucketPrio(q, int16(spec.Priority))
	h, bh := s.jobs.hash(spec.ID), s.bkts.hash(q, sig, tier, prio)
	ie, be := s.jobs.index.Home(h), s.bkts.find.Home(bh)
	b := s.bkts.lookupFrom(q, sig, tier, prio, bh, be)
	if s.jobs.getFrom(spec.ID, h, ie) != nil {
		return duplicate(spec.ID)
	}
	if b == nil {
		b = s.bucketFor(q, keys, spec.Group, spec.Mode, tier, prio)
	}
	s.admit(s.newJobIn(&spec, b, h), &spec)
	return nil
}

// SubmitWorkflow adds jobs and dependency edges at once: all of them, or on
// any error none. Edges may point between the new jobs or from a known
// job to a new one; duplicates count once. A cycle is refused with a
// *CycleError naming a job on it.
func (s *Scheduler) SubmitWorkflow(specs []JobSpec, edges []Edge) error {
	idx := make(map[string]int, len(specs))
	for i := range specs {
		if _, dup := idx[specs[i].ID]; dup {
			return fmt.Errorf("job %q: %w (twice in one workflow)", specs[i].ID, ErrDuplicateJob)
		}
		idx[specs[i].ID] = i
	}
	known := func(id string) bool {
		if _, ok := idx[id]; ok {
			return true
		}
		return s.jobs.get(id) != nil
	}
	for i := range specs {
		if err := s.validateJob(&specs[i], known); err != nil {
			return err
		}
	}
	upstream, err := s.collectEdges(specs, edges, idx, known)
	if err != nil {
		return err
	}
	if err := findCycle(specs, upstream, idx); err != nil {
		return err
	}
	jobs := make([]*job, len(specs))
	for i := range specs {
		jobs[i] = s.newJob(&specs[i])
	}
	for i, j := range jobs {
		for _, up := range upstream[i] {
			s.link(s.jobs.get(up), j)
		}
	}
	for i, j := range jobs {
		s.admit(j, &specs[i])
	}
	return nil
}

// collectEdges merges each spec's After list with the edges into one
// deduplicated upstream list per new job.
func (s *Scheduler) collectEdges(specs []JobSpec, edges []Edge, idx map[string]int, known func(string) bool) ([][]string, error) {
	upstream := make([][]string, len(specs))
	for i := range specs {
		upstream[i] = append(upstream[i], specs[i].After...)
	}
	for _, e := range edges {
		to, ok := idx[e.To]
		if !ok {
			if s.jobs.get(e.To) != nil {
				return nil, fmt.Errorf("%w: edge %q→%q: only new jobs can gain dependencies", ErrInvalidJob, e.From, e.To)
			}
			return nil, fmt.Errorf("edge %q→%q: job %q: %w", e.From, e.To, e.To, ErrUnknownJob)
		}
		if e.From == e.To {
			return nil, &CycleError{Job: e.To, Cycle: []string{e.To}}
		}
		if !known(e.From) {
			return nil, fmt.Errorf("job %q: dependency %q: %w", e.To, e.From, ErrUnknownDependency)
		}
		upstream[to] = append(upstream[to], e.From)
	}
	for i := range upstream {
		upstream[i] = dedupe(upstream[i])
	}
	return upstream, nil
}

// findCycle looks for a cycle among the new jobs (known jobs cannot depend
// on new ones, so any cycle lies among them) with an iterative DFS.
func findCycle(specs []JobSpec, upstream [][]string, idx map[string]int) error {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]uint8, len(specs))
	for root := range specs {
		if state[root] != unseen {
			continue
		}
		stack := []frame{{root, 0}}
		state[root] = onPath
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(upstream[f.node]) {
				state[f.node] = done
				stack = stack[:len(stack)-1]
				continue
			}
			up, ok := idx[upstream[f.node][f.next]]
			f.next++
			if !ok {
				continue
			}
			switch state[up] {
			case onPath:
				return cycleError(specs, stack, up)
			case unseen:
				state[up] = onPath
				stack = append(stack, frame{up, 0})
			}
		}
	}
	return nil
}

// frame is a step of findCycle's depth-first walk: a job and the index of
// the next upstream edge to follow.
type frame struct{ node, next int }

func cycleError(specs []JobSpec, stack []frame, at int) error {
	var path []string
	started := false
	for _, f := range stack {
		node := f.node
		if node == at {
			started = true
		}
		if started {
			path = append(path, specs[node].ID)
		}
	}
	return &CycleError{Job: specs[at].ID, Cycle: path}
}

func (s *Scheduler) link(up, down *job) {
	d := s.jobs.addExt(down)
	u := s.jobs.addExt(up)
	u.dependants = append(u.dependants, depLink{ext: d, slot: down.slot})
	d.pending++
}

// propagate tells the dependants of a finished job (x: its links) that it
// finished (ok: succeeded). It works through cancellations with an
// explicit stack, so long chains do not recurse. A link whose job is gone
// (its slot free, or reused by a job with other links) is skipped.
func (s *Scheduler) propagate(x *jobExt, ok bool) {
	type note struct {
		deps []depLink
		ok   bool
	}
	stack := []note{{x.dependants, ok}}
	x.dependants = nil
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, l := range n.deps {
			d := s.jobs.At(l.slot)
			if s.jobs.ext(d) != l.ext || d.state != stateWaiting {
				continue
			}
			if !n.ok && d.flags&flagRunAfterFailure == 0 {
				d.queue().waiting--
				s.stats.Cancelled++
				s.emit(Event{Kind: EventCancelled, JobID: d.id})
				stack = append(stack, note{l.ext.dependants, false})
				l.ext.dependants = nil
				s.dropDeadline(d)
				s.jobs.remove(d)
				s.releaseBucket(d.bucket)
				s.jobs.release(d)
				continue
			}
			l.ext.pending--
			if l.ext.pending == 0 {
				d.queue().waiting--
				s.dependenciesDone(d, l.ext)
			}
		}
	}
}
