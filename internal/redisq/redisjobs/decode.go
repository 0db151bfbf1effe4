package redisjobs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// stored is a job's hash, parsed.
type stored struct {
	id       int64
	state    int
	spec     jobtype.JobSpec // with its payload
	workflow int64
	attempt  int
	agent    string
	created  int64
	started  *int64
	finished *int64
	exitCode *int
	output   string
	errText  string
	readyAt  int64
	after    []int64
	progress *jobtype.Progress
	result   json.RawMessage
	attempts []jobtype.Attempt
}

// parseJob reads a job's hash; a missing or malformed field is a clear
// error naming the job and the field.
func parseJob(id int64, h map[string]string) (*stored, error) {
	if len(h) == 0 {
		return nil, fmt.Errorf("redisjobs: job %d: no hash", id)
	}
	p := fieldParser{id: id, h: h}
	st := &stored{id: id}
	st.state = int(p.int("st", true))
	if p.err == nil && (st.state < stQueued || st.state > stCancelled) {
		p.fail("st", "state code %d is not 0-4", st.state)
	}
	if spec, ok := h["spec"]; !ok {
		p.fail("spec", "missing")
	} else if err := json.Unmarshal([]byte(spec), &st.spec); err != nil && p.err == nil {
		p.fail("spec", "%v", err)
	}
	if pl, ok := h["p"]; ok {
		st.spec.Payload = json.RawMessage(pl)
	}
	st.spec.After = nil
	st.workflow, st.attempt = p.int("wf", false), int(p.int("att", true))
	st.agent, st.output, st.errText = h["ag"], h["o"], h["e"]
	st.created, st.readyAt = p.int("c", true), p.int("r", false)
	st.started, st.finished = p.opt("s"), p.opt("f")
	if x := p.opt("x"); x != nil {
		c := int(*x)
		st.exitCode = &c
	}
	st.after = p.ids("a")
	if pg, ok := h["pg"]; ok {
		st.progress = &jobtype.Progress{}
		if err := json.Unmarshal([]byte(pg), st.progress); err != nil {
			p.fail("pg", "%v", err)
		}
	}
	if rv, ok := h["rv"]; ok && rv != "" {
		st.result = json.RawMessage(rv)
	}
	if hist, ok := h["h"]; ok {
		st.attempts = p.attempts("h", hist)
	}
	if p.err != nil {
		return nil, p.err
	}
	return st, nil
}

// fieldParser parses the fields of one job's hash, keeping the first
// error.
type fieldParser struct {
	id  int64
	h   map[string]string
	err error
}

func (p *fieldParser) fail(field, format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("redisjobs: job %d: field %q: %s", p.id, field, fmt.Sprintf(format, args...))
	}
}

func (p *fieldParser) int(field string, required bool) int64 {
	v, ok := p.h[field]
	if !ok {
		if required {
			p.fail(field, "missing")
		}
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		p.fail(field, "%q is not an integer", v)
	}
	return n
}

func (p *fieldParser) opt(field string) *int64 {
	if _, ok := p.h[field]; !ok {
		return nil
	}
	n := p.int(field, true)
	return &n
}

func (p *fieldParser) ids(field string) []int64 {
	v := p.h[field]
	if v == "" {
		return nil
	}
	var out []int64
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			p.fail(field, "%q is not a list of ids", v)
			return nil
		}
		out = append(out, n)
	}
	return out
}

// job is the job as the API shows it (the engine fills in what only it
// knows).
func (st *stored) job() jobtype.Job {
	j := jobtype.Job{ID: strconv.FormatInt(st.id, 10), JobSpec: st.spec, State: jobtype.State(stateNames[st.state]),
		Attempt: st.attempt, Agent: st.agent, Output: st.output, Error: st.errText, ExitCode: st.exitCode,
		CreatedAt: time.UnixMilli(st.created).UTC(), StartedAt: optTime(st.started), FinishedAt: optTime(st.finished),
		Progress: st.progress, Result: st.result, Attempts: st.attempts}
	if st.workflow != 0 {
		j.Workflow = strconv.FormatInt(st.workflow, 10)
	}
	return j
}

// record is the unfinished job as the engine rebuilds it; after lists its
// dependencies that are still unfinished.
func (st *stored) record(unfinished map[int64]bool) jobs.Record {
	r := jobs.Record{ID: st.id, Spec: st.spec, Workflow: st.workflow, Attempt: st.attempt,
		Running: st.state == stRunning, CreatedAt: time.UnixMilli(st.created)}
	if st.readyAt > 0 && !r.Running {
		r.ReadyAt = time.UnixMilli(st.readyAt)
	}
	for _, d := range st.after {
		if unfinished[d] {
			r.After = append(r.After, d)
		}
	}
	slices.Sort(r.After)
	r.After = slices.Compact(r.After)
	return r
}

func optTime(ms *int64) *time.Time {
	if ms == nil {
		return nil
	}
	t := time.UnixMilli(*ms).UTC()
	return &t
}

// attempts reads a job's attempt history: a JSON array of entries whose
// numbers are decimal strings, as the write script keeps them.
func (p *fieldParser) attempts(field, text string) []jobtype.Attempt {
	var raw []struct {
		Attempt, Agent, StartedAt, EndedAt, ExitCode, Error, Output string
	}
	if text == "{}" { // an empty Lua table encodes as an object
		return nil
	}
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		p.fail(field, "%v", err)
		return nil
	}
	out := make([]jobtype.Attempt, len(raw))
	for i, r := range raw {
		a := jobtype.Attempt{Agent: r.Agent, Error: r.Error, Output: r.Output}
		a.Attempt, _ = strconv.Atoi(r.Attempt)
		if ms, err := strconv.ParseInt(r.StartedAt, 10, 64); err == nil {
			t := time.UnixMilli(ms).UTC()
			a.StartedAt = &t
		}
		if ms, err := strconv.ParseInt(r.EndedAt, 10, 64); err == nil {
			a.EndedAt = time.UnixMilli(ms).UTC()
		}
		if c, err := strconv.Atoi(r.ExitCode); err == nil {
			a.ExitCode = &c
		}
		out[i] = a
	}
	return out
}
