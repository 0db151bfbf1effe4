package redisjobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// script is one batch encoded for applyScript.
type script struct {
	keys []string
	args []any
}

// encode encodes ops (no prune among them) for one script. Runs of
// inserts, starts and finishes that share what they set go as one change
// each, their shared arguments once (the engine appends a lease's starts,
// a completion's finishes and a submission's inserts together).
func (s *Store) encode(ops []jobs.Op) (*script, error) {
	enc := encoder{keys: s.fixedKeys(), args: make([]any, 0, 3*len(ops)), n: s.k, seen: map[int64]bool{}}
	for i := 0; i < len(ops); {
		n, err := enc.next(ops[i:])
		if err != nil {
			return nil, err
		}
		i += n
	}
	args := make([]any, 0, 4+len(enc.check)+len(enc.args))
	args = append(args, s.fence.Token, enc.nextJob, enc.nextWF, len(enc.check))
	args = append(args, enc.check...)
	return &script{keys: enc.keys, args: append(args, enc.args...)}, nil
}

// encoder turns changes into applyScript's KEYS and ARGV.
type encoder struct {
	keys            []string
	args            []any
	n               names
	nextJob, nextWF int64
	// check lists the jobs whose existence the script reads: those a
	// change names before the batch inserts them (seen).
	check []any
	seen  map[int64]bool
	last  *insertHead // the head computed last, to reuse
}

func (e *encoder) add(args ...any) { e.args = append(e.args, args...) }

// next encodes the change at ops[0], or the run of changes it begins,
// and returns how many it encoded. It refuses a change that lacks what
// its kind needs, before anything is written.
func (e *encoder) next(ops []jobs.Op) (int, error) {
	switch ops[0].Kind {
	case jobs.OpInsert:
		return e.inserts(ops)
	case jobs.OpStart:
		return e.starts(ops), nil
	case jobs.OpFinish:
		return e.finishes(ops)
	}
	return 1, e.op(&ops[0])
}

// op encodes one change of the kinds that do not run.
func (e *encoder) op(op *jobs.Op) error {
	switch op.Kind {
	case jobs.OpPutQueue:
		if op.Queue == nil {
			return fmt.Errorf("redisjobs: put-queue change without a queue")
		}
		spec, err := json.Marshal(op.Queue)
		if err != nil {
			return fmt.Errorf("redisjobs: queue %q: %w", op.Queue.Name, err)
		}
		e.add("1", op.Queue.Name, spec)
	case jobs.OpDeleteQueue:
		e.add("2", op.Name)
	case jobs.OpPutLimit:
		if op.Limit == nil {
			return fmt.Errorf("redisjobs: put-limit change without a limit")
		}
		e.add("3", op.Limit.Pattern, limitValue(*op.Limit))
	case jobs.OpWorkflow:
		e.add("5", op.ID, op.Name, op.At.UnixMilli())
		e.nextWF = max(e.nextWF, op.ID+1)
	case jobs.OpRequeue:
		ended := op.Ended
		if ended.IsZero() {
			ended = op.At
		}
		e.add("7", op.ID, op.At.UnixMilli(), ended.UnixMilli())
		e.result(op.Result)
		e.job(op.ID)
	case jobs.OpReset:
		return e.reset(op)
	case jobs.OpPutCron, jobs.OpDeleteCron, jobs.OpFireCron:
		return e.cron(op)
	case jobs.OpKeepKey:
		if op.Key == nil {
			return fmt.Errorf("redisjobs: keep-key change without a key")
		}
		e.add("10", op.Key.Key, jobs.FormatRuns(op.Key.Jobs), op.Key.At.UnixMilli())
		e.keys = append(e.keys, e.n.reqs, e.n.reqsAt)
	case jobs.OpPruneKeys:
		e.add("11", op.At.UnixMilli(), "11", op.At.UnixMilli())
		e.keys = append(e.keys, e.n.idem, e.n.idemAt, e.n.reqs, e.n.reqsAt)
	case jobs.OpSnooze:
		e.add("a", op.ID, op.Attempt, op.At.UnixMilli())
		e.job(op.ID)
	case jobs.OpProgress:
		if op.Progress == nil {
			return fmt.Errorf("redisjobs: progress change without a progress")
		}
		pg, err := json.Marshal(op.Progress)
		if err != nil {
			return fmt.Errorf("redisjobs: progress of job %d: %w", op.ID, err)
		}
		e.add("b", op.ID, pg)
		e.job(op.ID)
	default:
		return fmt.Errorf("redisjobs: unknown change kind %d", op.Kind)
	}
	return nil
}

// cron encodes a periodic job's change: its entry written or removed
// (changes cp, cd); a fire is its job's insert, then the entry.
func (e *encoder) cron(op *jobs.Op) error {
	if op.Kind == jobs.OpDeleteCron {
		e.add("cd", op.Name)
		e.keys = append(e.keys, e.n.crons)
		return nil
	}
	if op.Cron == nil || (op.Kind == jobs.OpFireCron && op.Record == nil) {
		return fmt.Errorf("redisjobs: periodic-job change %d without its entry or job", op.Kind)
	}
	if op.Kind == jobs.OpFireCron {
		if _, err := e.inserts([]jobs.Op{{Kind: jobs.OpInsert, Record: op.Record}}); err != nil {
			return err
		}
	}
	b, err := json.Marshal(op.Cron)
	if err != nil {
		return fmt.Errorf("redisjobs: periodic job %q: %w", op.Cron.Name, err)
	}
	e.add("cp", op.Cron.Name, b)
	e.keys = append(e.keys, e.n.crons)
	return nil
}

// reset encodes a reset with what writes the job anew should a prune
// have deleted it (applyScript's change 9).
func (e *encoder) reset(op *jobs.Op) error {
	e.add("9", op.ID)
	e.job(op.ID)
	if op.Record == nil {
		e.add("0")
		return nil
	}
	h, err := e.head(op.Record)
	if err != nil {
		return err
	}
	e.add("1", h.queue, h.spec, []byte(op.Record.Spec.Payload), h.workflow, h.created, h.after, op.Name)
	e.keys = append(e.keys, e.n.queue(h.queue))
	if h.workflow != 0 {
		e.keys = append(e.keys, e.n.workflow(h.workflow))
	}
	return nil
}

// job adds the hash of a job that a change (not an insert) names, and
// has the script check that it exists unless the batch inserted it.
func (e *encoder) job(id int64) {
	if !e.seen[id] {
		e.seen[id] = true
		e.check = append(e.check, id)
	}
	e.keys = append(e.keys, e.n.job(id))
}

// insertHead is what a run of inserts shares.
type insertHead struct {
	r        *jobs.Record
	queue    string
	spec     []byte // JSON, without payload and dependencies' names
	workflow int64
	created  int64
	after    string
}

func (h *insertHead) same(o *insertHead) bool {
	return h.queue == o.queue && bytes.Equal(h.spec, o.spec) && h.workflow == o.workflow &&
		h.created == o.created && h.after == o.after
}

func (e *encoder) head(r *jobs.Record) (*insertHead, error) {
	if r == nil {
		return nil, fmt.Errorf("redisjobs: insert change without a record")
	}
	if e.last != nil && e.last.r == r {
		return e.last, nil
	}
	spec := r.Spec
	spec.Payload = nil
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("redisjobs: job %d: %w", r.ID, err)
	}
	e.last = &insertHead{r: r, queue: spec.Queue, spec: b, workflow: r.Workflow, created: r.CreatedAt.UnixMilli(), after: joinIDs(r.After)}
	return e.last, nil
}

// inserts encodes the run of inserts that ops begins.
func (e *encoder) inserts(ops []jobs.Op) (int, error) {
	first, err := e.head(ops[0].Record)
	if err != nil {
		return 0, err
	}
	n := 1
	for ; n < len(ops) && ops[n].Kind == jobs.OpInsert; n++ {
		h, err := e.head(ops[n].Record)
		if err != nil {
			return 0, err
		}
		if !h.same(first) {
			break
		}
	}
	e.add("4", first.queue, first.spec, first.workflow, first.created, first.after, n)
	e.keys = append(e.keys, e.n.queue(first.queue))
	if first.workflow != 0 {
		e.keys = append(e.keys, e.n.workflow(first.workflow))
	}
	for _, op := range ops[:n] {
		r := op.Record
		e.add(r.ID, []byte(r.Spec.Payload))
		e.keys = append(e.keys, e.n.job(r.ID))
		e.seen[r.ID] = true // the script knows it from here on
		e.nextJob = max(e.nextJob, r.ID+1)
	}
	for _, op := range ops[:n] {
		if r := op.Record; r.Spec.IdempotencyKey != "" {
			e.add("10", r.Spec.IdempotencyKey, r.ID, r.CreatedAt.UnixMilli())
			e.keys = append(e.keys, e.n.idem, e.n.idemAt)
		}
	}
	return n, nil
}

// starts encodes the run of starts by one agent at one time that ops
// begins.
func (e *encoder) starts(ops []jobs.Op) int {
	first := &ops[0]
	n := 1
	for n < len(ops) && ops[n].Kind == jobs.OpStart && ops[n].Agent == first.Agent && ops[n].At.Equal(first.At) {
		n++
	}
	e.add("6", first.Agent, first.At.UnixMilli(), n)
	for _, op := range ops[:n] {
		e.add(op.ID, op.Attempt)
		e.job(op.ID)
	}
	return n
}

// finishes encodes the run of finishes in one state at one time with
// one result that ops begins.
func (e *encoder) finishes(ops []jobs.Op) (int, error) {
	first := &ops[0]
	code := stateCode(first.State)
	if code < stSucceeded {
		return 0, fmt.Errorf("redisjobs: job %d cannot finish as %q", first.ID, first.State)
	}
	n := 1
	for n < len(ops) && ops[n].Kind == jobs.OpFinish && ops[n].State == first.State && ops[n].At.Equal(first.At) &&
		sameResult(ops[n].Result, first.Result) {
		n++
	}
	e.add("8", code, first.At.UnixMilli())
	e.result(first.Result)
	e.add(n)
	for _, op := range ops[:n] {
		e.add(op.ID)
		e.job(op.ID)
	}
	return n, nil
}

// sameResult says whether two results store the same (both none, or the
// same exit code, output and error).
func sameResult(a, b *jobtype.Result) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ExitCode == b.ExitCode && a.Output == b.Output && a.Error == b.Error && bytes.Equal(a.Value, b.Value)
}

// result encodes an attempt's result, or that there is none (the stored
// one stays): "1" with exit code, output and error, or "2" with those and
// the handler's JSON result.
func (e *encoder) result(r *jobtype.Result) {
	switch {
	case r == nil:
		e.add("0")
	case len(r.Value) > 0:
		e.add("2", r.ExitCode, r.Output, r.Error, []byte(r.Value))
	default:
		e.add("1", r.ExitCode, r.Output, r.Error)
	}
}

func joinIDs(ids []int64) string {
	var b []byte
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

func stateCode(s jobtype.State) int {
	for i, n := range stateNames {
		if jobtype.State(n) == s {
			return i
		}
	}
	return -1
}

// limitValue is a key limit as the limits hash keeps it: the concurrency
// limit alone ("5"; "0" deletes the entry), or with a rate the limit, the
// rate and the burst separated by spaces ("0 100/s 20").
func limitValue(l jobtype.KeyLimit) string {
	if l.Rate == "" {
		return strconv.Itoa(l.Limit)
	}
	return strconv.Itoa(l.Limit) + " " + l.Rate + " " + strconv.Itoa(l.Burst)
}

// parseLimitValue reads a limitValue back.
func parseLimitValue(pattern, v string) (jobtype.KeyLimit, error) {
	l := jobtype.KeyLimit{Pattern: pattern}
	f := strings.Fields(v)
	var err error
	switch len(f) {
	case 1:
		l.Limit, err = strconv.Atoi(f[0])
	case 3:
		l.Rate = f[1]
		l.Limit, err = strconv.Atoi(f[0])
		if err == nil {
			l.Burst, err = strconv.Atoi(f[2])
		}
	default:
		err = fmt.Errorf("want LIMIT or LIMIT RATE BURST")
	}
	if err != nil {
		return l, fmt.Errorf("redisjobs: load limit %q: %q: %w", pattern, v, err)
	}
	return l, nil
}
