package sched

import (
	"fmt"
	"strings"
	"time"
)

// simOpKind names an operation of the randomized simulation.
type simOpKind uint8

const (
	simDefineQueue simOpKind = iota
	simSetKeyLimit
	simSetTierLimits
	simSubmit
	simSubmitWorkflow
	simInteractive
	simAddWorker
	simRemoveWorker
	simDispatch
	simPull
	simComplete
	simCancel
	simRenew
	simAdvance
	simTick
	simRemoveQueue
	simEstimates
	simSetKeyRate
)

// simOp is one operation with every argument resolved, so that the list of
// operations of a run replays it.
type simOp struct {
	kind    simOpKind
	queue   QueueSpec
	jobs    []JobSpec // submit: one; workflow: several; interactive: one
	edges   []Edge
	worker  WorkerSpec
	id      string // job, worker, queue or key pattern
	n       int    // pull size, key limit, attempt, estimates count
	outcome Outcome
	limits  []int
	dt      time.Duration
	rate    Rate // key rate
}

// String renders the operation as one readable line.
func (op simOp) String() string {
	switch op.kind {
	case simDefineQueue:
		return "define-queue " + simQueueString(op.queue)
	case simSetKeyLimit:
		return fmt.Sprintf("key-limit %s=%d", op.id, op.n)
	case simSetTierLimits:
		return fmt.Sprintf("tier-limits %v", op.limits)
	case simSubmit:
		return "submit " + simJobString(op.jobs[0])
	case simSubmitWorkflow:
		return simWorkflowString(op.jobs, op.edges)
	case simInteractive:
		return fmt.Sprintf("interactive %s q=%s", op.jobs[0].ID, op.jobs[0].Queue)
	case simAddWorker:
		return "add-worker " + simWorkerString(op.worker)
	case simComplete:
		return fmt.Sprintf("complete %s attempt=%d %s", op.id, op.n, map[Outcome]string{Succeeded: "ok", FailedAttempt: "failed"}[op.outcome])
	case simPull:
		return fmt.Sprintf("pull %s max=%d", op.id, op.n)
	case simAdvance:
		return "advance " + op.dt.String()
	case simEstimates:
		return fmt.Sprintf("estimates %s max=%d", op.id, op.n)
	case simSetKeyRate:
		return fmt.Sprintf("key-rate %s=%d/%s burst %d", op.id, op.rate.Count, op.rate.Per, op.rate.Burst)
	}
	return simSimpleOps[op.kind] + strings.TrimSuffix(" "+op.id, " ")
}

var simSimpleOps = map[simOpKind]string{
	simRemoveWorker: "remove-worker", simDispatch: "dispatch", simCancel: "cancel",
	simRenew: "renew", simTick: "tick", simRemoveQueue: "remove-queue",
}

func simQueueString(q QueueSpec) string {
	s := fmt.Sprintf("%s prio=%d order=%s batch=%d", q.Name, q.Priority, q.Order, q.Batch)
	if len(q.Requires) > 0 {
		s += fmt.Sprintf(" requires=%v", q.Requires)
	}
	if q.Paused {
		s += " paused"
	}
	return s + " retry=" + simRetryString(q.Retry)
}

func simRetryString(p RetryPolicy) string {
	s := fmt.Sprintf("%dx%s", p.MaxAttempts, p.Backoff)
	if p.MaxBackoff > 0 {
		s += "<=" + p.MaxBackoff.String()
	}
	return s
}

func simJobString(sp JobSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s q=%s", sp.ID, sp.Queue)
	if sp.Default {
		b.WriteString(" default")
	} else {
		fmt.Fprintf(&b, " tier=%d", sp.Tier)
	}
	if sp.Priority != 0 {
		fmt.Fprintf(&b, " prio=%d", sp.Priority)
	}
	if len(sp.Keys) > 0 {
		fmt.Fprintf(&b, " keys=%v", sp.Keys)
	}
	if sp.Group != "" {
		fmt.Fprintf(&b, " group=%s", sp.Group)
	}
	if sp.Mode != ModeNone {
		fmt.Fprintf(&b, " %s", sp.Mode)
	}
	if len(sp.After) > 0 {
		fmt.Fprintf(&b, " after=%v", sp.After)
	}
	if sp.RunAfterFailure {
		b.WriteString(" run-after-failure")
	}
	if sp.Retry != nil {
		b.WriteString(" retry=" + simRetryString(*sp.Retry))
	}
	return b.String()
}

func simWorkflowString(specs []JobSpec, edges []Edge) string {
	parts := make([]string, len(specs))
	for i, sp := range specs {
		parts[i] = simJobString(sp)
	}
	s := "workflow {" + strings.Join(parts, "; ") + "}"
	for _, e := range edges {
		s += fmt.Sprintf(" %s->%s", e.From, e.To)
	}
	return s
}

func simWorkerString(w WorkerSpec) string {
	s := fmt.Sprintf("%s slots=%d", w.ID, w.Slots)
	if w.Push {
		s += " push"
	} else {
		s += " pull"
	}
	if len(w.Capabilities) > 0 {
		s += fmt.Sprintf(" caps=%v", w.Capabilities)
	}
	if w.LeaseTTL > 0 {
		s += " ttl=" + w.LeaseTTL.String()
	}
	return s
}

func simTiersString(tiers []Tier) string {
	parts := make([]string, len(tiers))
	for i, t := range tiers {
		parts[i] = fmt.Sprintf("%s %s", t.Name, t.Duration)
		switch {
		case t.Limit > 0:
			parts[i] += fmt.Sprintf(" limit %d", t.Limit)
		case t.Share > 0:
			parts[i] += fmt.Sprintf(" share %g", t.Share)
		}
	}
	return "tiers [" + strings.Join(parts, ", ") + "]"
}
