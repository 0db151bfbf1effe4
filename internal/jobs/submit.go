package jobs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// Enqueue submits jobs, all or none, and returns their ids in order.
func (e *Engine) Enqueue(ctx context.Context, specs []jobtype.JobSpec) ([]string, error) {
	ans, err := e.EnqueueAnswer(ctx, specs)
	return ans.IDs, err
}

// EnqueueAnswer submits jobs, all or none, and returns their ids in
// order; a spec that repeats a kept idempotency key or an unfinished
// unique job creates nothing, and its id is the existing job's
// (Existing says which).
func (e *Engine) EnqueueAnswer(ctx context.Context, specs []jobtype.JobSpec) (jobtype.EnqueueAnswer, error) {
	return e.EnqueueKeyed(ctx, "", specs)
}

// EnqueueKeyed is EnqueueAnswer for a request with an idempotency key of
// its own (none if key is ""): a repeat of a kept key answers the first
// request's ids, every one existing, and creates nothing; a repeat with
// another number of jobs is a conflict.
func (e *Engine) EnqueueKeyed(ctx context.Context, key string, specs []jobtype.JobSpec) (jobtype.EnqueueAnswer, error) {
	var ans jobtype.EnqueueAnswer
	if len(specs) == 0 {
		return ans, invalid("jobs", "empty")
	}
	if err := checkRequestKey(key); err != nil {
		return ans, err
	}
	e.mu.Lock()
	now := e.cfg.Now()
	e.expireKeysLocked(now)
	// A refusal still hands the store the expired keys' prune, if any.
	fail := func(err error) (jobtype.EnqueueAnswer, error) {
		e.flushLocked()
		e.mu.Unlock()
		return jobtype.EnqueueAnswer{}, err
	}
	if key != "" {
		if ans, ok, err := e.replayLocked(key, len(specs)); err != nil {
			return fail(err)
		} else if ok {
			// Answer once the first request's jobs are durable.
			return ans, e.commit(ctx)
		}
	}
	first := e.nextJob
	ids := make([]string, len(specs))
	recs := make([]*Record, 0, len(specs))
	core := make([]sched.JobSpec, 0, len(specs))
	uks := make([]string, 0, len(specs))
	var b batchDedup
	for i := range specs {
		sp := &specs[i]
		if err := checkDedup(sp); err != nil {
			return fail(prefixed(fmt.Sprintf("jobs[%d]", i), err))
		}
		uk := specUniqueKey(sp, now)
		if id, ok := e.existingLocked(sp, uk, &b, ids); ok {
			ids[i] = id
			if ans.Existing == nil {
				ans.Existing = make([]bool, len(specs))
			}
			ans.Existing[i] = true
			continue
		}
		r, cs, err := e.prepareLocked(*sp, first+int64(len(recs)))
		if err != nil {
			return fail(prefixed(fmt.Sprintf("jobs[%d]", i), err))
		}
		r.CreatedAt = now
		ids[i] = cs.ID
		b.remember(sp, uk, i)
		recs, core, uks = append(recs, r), append(core, cs), append(uks, uk)
	}
	ans.IDs = ids
	// When every job existed, the answer still waits until they are
	// durable, as their own enqueue may be waiting for the store.
	if len(core) > 0 {
		if err := e.submitLocked(core, nil); err != nil {
			return fail(err)
		}
		e.nextJob += int64(len(recs))
		for i, r := range recs {
			e.addLive(r, core[i].After)
			e.addUniqueLocked(e.live[core[i].ID], uks[i])
			if k := r.Spec.IdempotencyKey; k != "" {
				e.addKeyLocked(IdemKey{Key: k, Job: r.ID, At: r.CreatedAt})
			}
		}
		e.afterChangeLocked()
	}
	e.keepRequestKeyLocked(key, ids, now)
	return ans, e.commit(ctx)
}

// submitLocked hands jobs to the core: one alone, several atomically.
func (e *Engine) submitLocked(specs []sched.JobSpec, edges []sched.Edge) error {
	var err error
	if len(specs) == 1 && len(edges) == 0 {
		err = e.core.Submit(specs[0])
	} else {
		err = e.core.SubmitWorkflow(specs, edges)
	}
	if err != nil {
		var ce *sched.CycleError
		if errors.As(err, &ce) {
			return &FieldError{Msg: err.Error(), Kind: ErrInvalid, Cycle: ce.Cycle}
		}
		return invalid("jobs", "%v", err)
	}
	return nil
}

// addLive records a submitted job beside the core and for the store.
func (e *Engine) addLive(r *Record, after []string) {
	e.trackLive(r, after)
	e.emit(Op{Kind: OpInsert, Record: r})
}

// trackLive records a submitted job beside the core.
func (e *Engine) trackLive(r *Record, after []string) {
	id := jobID(r.ID)
	l := &liveJob{n: r.ID, id: id, queue: r.Spec.Queue, payload: r.Spec.Payload,
		timeoutMs: r.Spec.TimeoutMs, after: after, workflow: r.Workflow}
	if r.Spec.RunAt != nil {
		l.runAt = *r.Spec.RunAt
	}
	e.putLive(l)
	e.keepTrace(id, r.Spec.Traceparent)
}

// prepareLocked checks a job and resolves its tier and dependencies; it
// returns the stored record and the core's spec.
func (e *Engine) prepareLocked(sp jobtype.JobSpec, n int64) (*Record, sched.JobSpec, error) {
	cs := sched.JobSpec{ID: jobID(n), Queue: sp.Queue, Priority: sp.Priority, Keys: sp.Keys,
		Group: sp.Group, RunAfterFailure: sp.RunAfterFailure}
	if err := e.checkBasics(&sp, &cs); err != nil {
		return nil, cs, err
	}
	if err := checkSchedule(&sp, &cs, e.cfg.Now()); err != nil {
		return nil, cs, err
	}
	after, err := e.liveDeps(sp.After, sp.RunAfterFailure)
	if err != nil {
		return nil, cs, err
	}
	cs.After = after
	rec := &Record{ID: n, Spec: sp, CreatedAt: e.cfg.Now()}
	for _, d := range after {
		rec.After = append(rec.After, e.live[d].n)
	}
	return rec, cs, nil
}

// checkBasics validates every field but the dependencies and fills the
// core's spec.
func (e *Engine) checkBasics(sp *jobtype.JobSpec, cs *sched.JobSpec) error {
	if sp.Queue == "" {
		return invalid("queue", "required")
	}
	if _, ok := e.queues[sp.Queue]; !ok {
		return invalid("queue", "unknown queue %q", sp.Queue)
	}
	if len(sp.Payload) > e.cfg.MaxPayload {
		return invalid("payload", "%d bytes, over the limit of %d", len(sp.Payload), e.cfg.MaxPayload)
	}
	if sp.Priority < math.MinInt16 || sp.Priority > math.MaxInt16 {
		return invalid("priority", "%d is outside -32768..32767", sp.Priority)
	}
	if err := e.resolveTier(sp, cs); err != nil {
		return err
	}
	cs.Timeout = time.Duration(sp.TimeoutMs) * time.Millisecond
	if err := checkKeys(sp); err != nil {
		return err
	}
	if err := checkLabels(sp); err != nil {
		return err
	}
	e.checkTraceparent(sp)
	switch sp.Mode {
	case "":
	case "read":
		cs.Mode = sched.ModeRead
	case "write":
		cs.Mode = sched.ModeWrite
	default:
		return invalid("mode", "%q is not read or write", sp.Mode)
	}
	if sp.Retry != nil {
		r := normalRetry(*sp.Retry)
		p, err := coreRetry(r)
		if err != nil {
			return prefixed("retry", err)
		}
		sp.Retry, cs.Retry = &r, &p
	}
	if sp.Backoff != nil {
		b := normalBackoff(*sp.Backoff)
		p, err := coreBackoff(b)
		if err != nil {
			return prefixed("backoff", err)
		}
		sp.Backoff, cs.Backoff = &b, &p
	}
	return nil
}

func checkKeys(sp *jobtype.JobSpec) error {
	for i, k := range sp.Keys {
		if k == "" || len(k) > 256 || strings.IndexByte(k, 0) >= 0 {
			return invalid(fmt.Sprintf("keys[%d]", i), "a key is 1-256 bytes without NUL")
		}
	}
	if len(sp.Group) > 256 || strings.IndexByte(sp.Group, 0) >= 0 {
		return invalid("group", "a group is at most 256 bytes without NUL")
	}
	return nil
}

// resolveTier picks the job's tier from its tier name or timeout and
// writes the name back into sp.
func (e *Engine) resolveTier(sp *jobtype.JobSpec, cs *sched.JobSpec) error {
	tiers := e.cfg.Tiers
	if sp.TimeoutMs < 0 {
		return invalid("timeoutMs", "%d is negative", sp.TimeoutMs)
	}
	timeout := time.Duration(sp.TimeoutMs) * time.Millisecond
	switch {
	case sp.Tier == "default":
		cs.Default = true
		if timeout > tiers[len(tiers)-1].Duration {
			return invalid("timeoutMs", "%d is longer than the slowest tier (%s)", sp.TimeoutMs, tiers[len(tiers)-1].Duration)
		}
		return nil
	case sp.Tier != "":
		for i, t := range tiers {
			if t.Name == sp.Tier {
				cs.Tier = i
				if timeout > t.Duration {
					return invalid("timeoutMs", "%d is longer than tier %s (%s)", sp.TimeoutMs, t.Name, t.Duration)
				}
				return nil
			}
		}
		return invalid("tier", "unknown tier %q (tiers: %s, or default)", sp.Tier, tierNames(tiers))
	}
	for i, t := range tiers {
		if timeout <= t.Duration {
			cs.Tier, sp.Tier = i, t.Name
			return nil
		}
	}
	return invalid("timeoutMs", "%d is longer than the slowest tier (%s)", sp.TimeoutMs, tiers[len(tiers)-1].Duration)
}

func tierNames(tiers []sched.Tier) string {
	names := make([]string, len(tiers))
	for i, t := range tiers {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// liveDeps keeps the dependencies that have not finished; a finished one
// must have succeeded, unless the job runs after failures.
func (e *Engine) liveDeps(after []string, runAfterFailure bool) ([]string, error) {
	var out []string
	for i, d := range after {
		field := fmt.Sprintf("after[%d]", i)
		if _, ok := e.live[d]; ok {
			out = append(out, d)
			continue
		}
		n, err := parseID(field, d)
		if err != nil {
			return nil, invalid(field, "no job %q", d)
		}
		j, err := e.store.Job(context.Background(), n)
		if err != nil {
			return nil, invalid(field, "no job %q", d)
		}
		if j.State != jobtype.StateSucceeded && !runAfterFailure {
			return nil, invalid(field, "job %s %s, so this job could never run (set runAfterFailure to run it anyway)", d, j.State)
		}
	}
	return out, nil
}

// ParseTargets reads a target list
// (docs/design.md, "Per-key limits, priorities and random picks"):
// one target per line, spaces around it trimmed, blank lines ignored.
func ParseTargets(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			out = append(out, t)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading targets: %w", err)
	}
	return out, nil
}

// EnqueueTargets submits one job per target into queue, its payload the
// target as a JSON string and its key sched.TargetKey(target).
func (e *Engine) EnqueueTargets(ctx context.Context, queue string, targets []string) ([]string, error) {
	if len(targets) == 0 {
		return nil, invalid("targets", "no target in the body")
	}
	specs := make([]jobtype.JobSpec, len(targets))
	for i, t := range targets {
		payload, _ := json.Marshal(t)
		specs[i] = jobtype.JobSpec{Queue: queue, Payload: payload, Keys: []string{sched.TargetKey(t)}}
	}
	return e.Enqueue(ctx, specs)
}

// SubmitWorkflow submits a workflow atomically and returns its id and the
// id of each job by name.
func (e *Engine) SubmitWorkflow(ctx context.Context, w jobtype.WorkflowSpec) (string, map[string]string, error) {
	if len(w.Jobs) == 0 {
		return "", nil, invalid("jobs", "a workflow needs at least one job")
	}
	e.mu.Lock()
	wf, first := e.nextWF, e.nextJob
	byName, err := workflowNames(w, first)
	if err != nil {
		e.mu.Unlock()
		return "", nil, err
	}
	recs, core, edges, err := e.prepareWorkflow(w, wf, byName)
	if err == nil {
		err = e.submitLocked(core, edges)
	}
	if err != nil {
		e.mu.Unlock()
		return "", nil, namesInCycle(err, w, first)
	}
	e.nextWF++
	e.nextJob += int64(len(w.Jobs))
	e.emit(Op{Kind: OpWorkflow, ID: wf, Name: w.Name, At: e.cfg.Now()})
	for i, r := range recs {
		e.addLive(r, depsOf(core[i].ID, edges))
	}
	e.afterChangeLocked()
	return jobID(wf), byName, e.commit(ctx)
}

func workflowNames(w jobtype.WorkflowSpec, first int64) (map[string]string, error) {
	byName := make(map[string]string, len(w.Jobs))
	for i, j := range w.Jobs {
		if j.Name == "" {
			return nil, invalid(fmt.Sprintf("jobs[%d].name", i), "required")
		}
		if _, dup := byName[j.Name]; dup {
			return nil, invalid(fmt.Sprintf("jobs[%d].name", i), "%q appears twice", j.Name)
		}
		byName[j.Name] = jobID(first + int64(i))
	}
	return byName, nil
}

// prepareWorkflow checks each job and turns names into ids and edges.
func (e *Engine) prepareWorkflow(w jobtype.WorkflowSpec, wf int64, byName map[string]string) ([]*Record, []sched.JobSpec, []sched.Edge, error) {
	recs := make([]*Record, len(w.Jobs))
	core := make([]sched.JobSpec, len(w.Jobs))
	var edges []sched.Edge
	for i, j := range w.Jobs {
		field := fmt.Sprintf("jobs[%d]", i)
		for k, a := range j.After {
			from, ok := byName[a]
			if !ok {
				return nil, nil, nil, invalid(fmt.Sprintf("%s.after[%d]", field, k), "no job named %q in the workflow", a)
			}
			edges = append(edges, sched.Edge{From: from, To: byName[j.Name]})
		}
		spec := j.JobSpec
		spec.After = nil
		if err := noDedupInWorkflow(&spec); err != nil {
			return nil, nil, nil, prefixed(field, err)
		}
		r, cs, err := e.prepareLocked(spec, e.nextJob+int64(i))
		if err != nil {
			return nil, nil, nil, prefixed(field, err)
		}
		r.Workflow = wf
		recs[i], core[i] = r, cs
	}
	for i, ed := range w.Edges {
		from, ok := byName[ed.From]
		if !ok {
			return nil, nil, nil, invalid(fmt.Sprintf("edges[%d].from", i), "no job named %q in the workflow", ed.From)
		}
		to, ok := byName[ed.To]
		if !ok {
			return nil, nil, nil, invalid(fmt.Sprintf("edges[%d].to", i), "no job named %q in the workflow", ed.To)
		}
		edges = append(edges, sched.Edge{From: from, To: to})
	}
	for i := range recs {
		for _, d := range depsOf(core[i].ID, edges) {
			if n := mustID(d); !slices.Contains(recs[i].After, n) {
				recs[i].After = append(recs[i].After, n)
				recs[i].Spec.After = append(recs[i].Spec.After, d)
			}
		}
	}
	return recs, core, edges, nil
}

func depsOf(id string, edges []sched.Edge) []string {
	var out []string
	for _, ed := range edges {
		if ed.To == id {
			out = append(out, ed.From)
		}
	}
	return out
}

func mustID(s string) int64 {
	n, _ := parseID("", s)
	return n
}

// namesInCycle rewrites a cycle error from job ids to the workflow's names.
func namesInCycle(err error, w jobtype.WorkflowSpec, first int64) error {
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Cycle == nil {
		return err
	}
	name := func(id string) string {
		if n := mustID(id) - first; n >= 0 && n < int64(len(w.Jobs)) {
			return w.Jobs[n].Name
		}
		return id
	}
	names := make([]string, len(fe.Cycle))
	for i, id := range fe.Cycle {
		names[i] = name(id)
	}
	return &FieldError{Msg: fmt.Sprintf("dependency cycle through job %q: %s → %s", names[0], strings.Join(names, " → "), names[0]),
		Kind: ErrInvalid, Cycle: names}
}

// errNotLive says that a job is not unfinished; the caller reads why.
var errNotLive = errors.New("job not live")

func (e *Engine) cancelLocked(id string) error {
	if err := e.core.Cancel(id); err != nil {
		return fmt.Errorf("jobs: cancel %s: %w", id, err)
	}
	e.finished(id, jobtype.StateCancelled, e.cfg.Now(), nil)
	return nil
}

// finishedConflict explains why a job that is not live cannot be changed.
func (e *Engine) finishedConflict(ctx context.Context, n int64, verb string) error {
	j, err := e.store.Job(ctx, n)
	if err != nil {
		return err
	}
	return conflict("", "job %s already %s; it cannot be %s", j.ID, j.State, verb)
}

// workflowName reads the name of a finished job's workflow ("" for none),
// which a retry writes back should a prune have deleted the job and its
// workflow since it was read. A workflow already gone means the job went
// with it: the job's own error (not found) is returned.
func (e *Engine) workflowName(ctx context.Context, old jobtype.Job) (string, error) {
	if old.Workflow == "" {
		return "", nil
	}
	name, err := e.store.WorkflowInfo(ctx, mustID(old.Workflow))
	if errors.Is(err, ErrNotFound) {
		if _, jerr := e.store.Job(ctx, mustID(old.ID)); jerr != nil {
			return "", jerr
		}
	}
	return name, err
}

// resubmitLocked queues a finished job again. Its OpReset carries the
// whole record (and its workflow's name): a prune that deleted the job
// after Retry read it runs before the reset, and the store then writes
// the job anew instead of losing it.
func (e *Engine) resubmitLocked(old jobtype.Job, n int64, wfName string) error {
	sp := old.JobSpec
	cs := sched.JobSpec{ID: old.ID, Queue: sp.Queue, Priority: sp.Priority, Keys: sp.Keys,
		Group: sp.Group, RunAfterFailure: sp.RunAfterFailure}
	if err := e.checkBasics(&sp, &cs); err != nil {
		return err
	}
	now := e.cfg.Now()
	if sp.Deadline != nil && sp.Deadline.After(now) {
		cs.Deadline = *sp.Deadline // a retry runs at once, by the deadline if it is still to come
	}
	for _, d := range sp.After {
		if _, ok := e.live[d]; ok {
			cs.After = append(cs.After, d)
		}
	}
	if err := e.submitLocked([]sched.JobSpec{cs}, nil); err != nil {
		return err
	}
	wf := int64(0)
	if old.Workflow != "" {
		wf = mustID(old.Workflow)
	}
	id := jobID(n)
	e.putLive(&liveJob{n: n, id: id, queue: sp.Queue, payload: sp.Payload, timeoutMs: sp.TimeoutMs, after: cs.After, workflow: wf})
	e.keepTrace(id, sp.Traceparent)
	e.addUniqueLocked(e.live[id], specUniqueKey(&sp, old.CreatedAt))
	rec := &Record{ID: n, Spec: sp, Workflow: wf, CreatedAt: old.CreatedAt}
	rec.Spec.After = nil
	for _, d := range cs.After {
		rec.After = append(rec.After, e.live[d].n)
	}
	e.emit(Op{Kind: OpReset, ID: n, At: now, Record: rec, Name: wfName})
	if sp.RunAt != nil || sp.Deadline != nil {
		e.emit(Op{Kind: OpRequeue, ID: n, At: now}) // its ready time: runAt no longer holds it (restoreSchedule)
	}
	return nil
}
