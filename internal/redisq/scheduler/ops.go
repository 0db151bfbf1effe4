package scheduler

import (
	"context"
	"fmt"
	"strconv"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/sched"
)

// op is one decision for applyScript.
type op struct {
	kind string // assign, timeout, end, deny, drop
	id   string
	a, b string
}

// settle runs the core's cycle, turns what it decided into ops and writes
// them in one script per batch: events first (a halted task hears it before
// its backend is reused), then assignments. An assignment whose task hash
// is gone frees its slot, and the cycle runs again.
func (l *leader) settle(ctx context.Context) error {
	for {
		for _, e := range l.core.Events() {
			l.event(e)
		}
		l.dispatch()
		if len(l.ops) == 0 {
			break
		}
		gone, err := l.flush(ctx)
		if err != nil {
			return err
		}
		if len(gone) == 0 {
			break
		}
		for _, id := range gone {
			l.s.log.Info("task gone before it left the queue; slot freed", "task", quoteID(id))
			l.free(id)
		}
	}
	// A changed queue is estimated at once, but at most every
	// freshEstimateGap: under a flood of arrivals the pass (linear in the
	// queue) would otherwise run after every step. The tick covers the rest.
	if l.fresh && l.queued > 0 && l.s.cfg.Now().Sub(l.estimatedAt) >= freshEstimateGap {
		return l.estimates(ctx)
	}
	return nil
}

// dispatch runs the core's cycle. A task it starts and then downgrades in
// the same cycle starts in the tier it ends up in.
func (l *leader) dispatch() {
	as := l.core.Dispatch()
	at := make(map[string]int, len(as))
	for i := range as {
		at[as[i].JobID] = i
	}
	for _, e := range l.core.Events() {
		if i, ok := at[e.JobID]; ok && e.Kind == sched.EventDowngraded {
			as[i].Tier, as[i].Duration = e.Tier, e.Duration
			continue
		}
		l.event(e)
	}
	for _, a := range as {
		l.assigned(a)
	}
}

// event carries out the queue protocol's reaction to a core event.
func (l *leader) event(e sched.Event) {
	t := l.tasks[e.JobID]
	if t == nil {
		return
	}
	r, ok := asyqueue.React(e, l.s.cfg.Tiers, l.s.cfg.Tiers[t.tier].Name)
	if !ok {
		return
	}
	if r.Cancel {
		_ = l.core.Cancel(e.JobID)
	}
	if r.Note.Kind != "" {
		l.s.recent.Add(l.s.cfg.Now(), r.Note.Kind, r.Note.Task, r.Note.Detail)
	}
	if e.Kind == sched.EventHalted {
		l.s.log.Info("halted an interactive task for queued ones", "task", e.JobID)
	}
	if r.Shorten > 0 {
		l.s.log.Info("downgraded", "task", e.JobID, "tier", l.s.cfg.Tiers[r.Tier].Name, "stop_now", e.StopNow)
		t.tier = r.Tier
		l.ops = append(l.ops, op{kind: "timeout", id: e.JobID, a: l.msOf(r.Tier)})
	}
	if r.End != "" {
		l.end(e.JobID, r.End)
	}
}

// end forgets a task the core already released and tells its queue server.
func (l *leader) end(id, text string) {
	delete(l.tasks, id)
	l.s.ended.Add(l.s.cfg.Now())
	l.ops = append(l.ops, op{kind: "end", id: id, b: redisq.Control{Kind: redisq.ControlEnd, Text: text}.String()})
}

// assigned records a start and queues its op.
func (l *leader) assigned(a sched.Assignment) {
	t := l.tasks[a.JobID]
	if t == nil {
		t = &task{}
		l.tasks[a.JobID] = t
	}
	if a.Interactive {
		t.class = "interactive"
	}
	t.startedAt = l.s.cfg.Now()
	if !t.running && !a.Interactive {
		l.queued--
		l.fresh = true
	}
	t.running, t.attempt, t.tier, t.interactive = true, a.Attempt, a.Tier, a.Interactive
	o := op{kind: "assign", id: a.JobID, a: "interactive"}
	if !a.Interactive {
		o.a = l.msOf(a.Tier)
		o.b = o.a
	}
	l.ops = append(l.ops, o)
}

// free releases a task in the core, whatever its state, and forgets it.
func (l *leader) free(id string) {
	t := l.tasks[id]
	if t == nil {
		return
	}
	if !t.running {
		l.queued--
		l.fresh = true
	}
	delete(l.tasks, id)
	_ = l.core.Cancel(id)
	for _, e := range l.core.Events() {
		if e.Kind != sched.EventStopped || e.JobID != id {
			l.event(e)
		}
	}
}

// flush writes the pending ops and returns the IDs of assignments whose
// task was gone.
func (l *leader) flush(ctx context.Context) ([]string, error) {
	ops := l.ops
	l.ops = nil
	var gone []string
	k := l.s.keys
	for len(ops) > 0 {
		n := min(len(ops), maxBatch)
		keys := make([]string, 0, 4+2*n)
		keys = append(keys, k.Leader(), k.Queue(), k.Executing(), k.Outcoming())
		args := make([]any, 0, 3+4*n)
		args = append(args, l.token, l.s.cfg.Now().UnixMilli(), redisq.TaskTTL.Milliseconds())
		for _, o := range ops[:n] {
			keys = append(keys, k.Task(o.id), k.TaskControl(o.id))
			args = append(args, o.kind, o.id, o.a, o.b)
		}
		v, err := runScript(ctx, l.s.rdb, applyScript, "write decisions", keys, args...)
		if err != nil {
			return nil, err
		}
		res, _ := v.([]any)
		for i, o := range ops[:n] {
			if o.kind == "assign" && i < len(res) && res[i] == int64(0) {
				gone = append(gone, o.id)
			}
		}
		ops = ops[n:]
	}
	return gone, nil
}

// asInt reads an integer reply element.
func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// asStrings reads an array reply of strings.
func asStrings(v any) []string {
	xs, _ := v.([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// reply checks the shape of a script's reply.
func reply(v any, n int, what string) ([]any, error) {
	xs, ok := v.([]any)
	if !ok || len(xs) != n {
		return nil, fmt.Errorf("%s: unexpected reply %v", what, v)
	}
	return xs, nil
}
