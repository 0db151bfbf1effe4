package jobs

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// cronParser reads a periodic job's spec: the standard five fields
// (minute, hour, day of month, month, day of week) or a descriptor
// (@hourly, @every 90s, ...), as robfig/cron's ParseStandard does
// (docs/design.md, "Periodic jobs").
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronEntry is a periodic job in memory: its stored record, its parsed
// schedule and time zone, and the next tick that makes a job (zero while
// paused, or when the schedule has no tick left).
type cronEntry struct {
	rec   CronRecord
	sched cron.Schedule
	loc   *time.Location
	next  time.Time
}

// ParseCron checks a periodic job's spec and time zone (empty: UTC) and
// returns the schedule and location; the error names the field at fault
// with the parser's reason.
func ParseCron(spec, timezone string) (cron.Schedule, *time.Location, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil, invalid("spec", "required, e.g. \"0 * * * *\" or \"@hourly\"")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, nil, invalid("spec", "give the time zone in the timezone field, not in the spec")
	}
	s, err := parseSpec(spec)
	if err != nil {
		return nil, nil, invalid("spec", "%q does not parse: %v", spec, err)
	}
	loc := time.UTC
	if timezone != "" {
		l, err := time.LoadLocation(timezone)
		if err != nil || timezone == "Local" {
			return nil, nil, invalid("timezone", "unknown time zone %q (an IANA name such as Europe/Paris, or UTC)", timezone)
		}
		loc = l
	}
	return s, loc, nil
}

// parseSpec runs the parser, turning a panic on odd input into an error.
func parseSpec(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return cronParser.Parse(spec)
}

// after is the first tick strictly after t, or zero when there is none
// within five years (a spec such as "0 0 30 2 *").
func (c *cronEntry) after(t time.Time) time.Time {
	n := c.sched.Next(t.In(c.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// schedule sets the next tick: none while paused, else the first after
// the last tick that made a job and after From.
func (c *cronEntry) schedule() {
	c.next = time.Time{}
	if c.rec.Paused {
		return
	}
	base := c.rec.From
	if c.rec.LastAt.After(base) {
		base = c.rec.LastAt
	}
	c.next = c.after(base)
}

// latestDue is the last tick at or before now, given that first (a tick)
// is at or before now. Ticks missed while no engine ran collapse into
// this one (docs/design.md, "Periodic jobs"). An @every schedule counts
// in whole periods from first; a cron schedule is searched from windows
// before now that double until one holds a tick, so that a long outage
// costs few steps.
func (c *cronEntry) latestDue(first, now time.Time) time.Time {
	if d, ok := c.sched.(cron.ConstantDelaySchedule); ok && d.Delay > 0 {
		return first.Add(now.Sub(first) / d.Delay * d.Delay)
	}
	from := first
	for w := time.Second; ; w *= 2 {
		start := now.Add(-w)
		if !start.After(first) {
			break
		}
		if n := c.after(start); !n.IsZero() && !n.After(now) {
			from = n
			break
		}
	}
	for {
		n := c.after(from)
		if n.IsZero() || n.After(now) {
			return from
		}
		from = n
	}
}

// view is the entry as the API shows it.
func (c *cronEntry) view() jobtype.Cron {
	r := c.rec
	out := jobtype.Cron{Name: r.Name, Spec: r.Spec, Queue: r.Job.Queue, Timezone: r.Timezone, Job: r.Job, Paused: r.Paused}
	if !c.next.IsZero() {
		t := c.next.UTC()
		out.NextAt = &t
	}
	if !r.LastAt.IsZero() {
		t := r.LastAt.UTC()
		out.LastAt = &t
	}
	return out
}

// newCronEntry parses a stored or new record.
func newCronEntry(rec CronRecord) (*cronEntry, error) {
	s, loc, err := ParseCron(rec.Spec, rec.Timezone)
	if err != nil {
		return nil, err
	}
	c := &cronEntry{rec: rec, sched: s, loc: loc}
	c.schedule()
	return c, nil
}

// CreateCron adds a periodic job; ErrConflict when the name is taken.
// Its first tick is the first after now.
func (e *Engine) CreateCron(ctx context.Context, sp jobtype.CronSpec) (jobtype.Cron, error) {
	rec, err := cronRecordOf(sp)
	if err != nil {
		return jobtype.Cron{}, err
	}
	e.mu.Lock()
	if err := e.checkCronLocked(rec); err != nil {
		e.mu.Unlock()
		return jobtype.Cron{}, err
	}
	rec.From = e.cfg.Now()
	c, err := newCronEntry(rec)
	if err != nil {
		e.mu.Unlock()
		return jobtype.Cron{}, err
	}
	if c.after(rec.From).IsZero() {
		e.mu.Unlock()
		return jobtype.Cron{}, invalid("spec", "%q has no tick in the next five years", rec.Spec)
	}
	e.crons[rec.Name] = c
	e.putCronLocked(c)
	view := c.view()
	return view, e.commit(ctx)
}

// cronRecordOf checks what can be checked without the engine's state.
func cronRecordOf(sp jobtype.CronSpec) (CronRecord, error) {
	if !queueName.MatchString(sp.Name) {
		return CronRecord{}, invalid("name", "%q is not 1-128 characters of A-Z a-z 0-9 . _ -", sp.Name)
	}
	if _, _, err := ParseCron(sp.Spec, sp.Timezone); err != nil {
		return CronRecord{}, err
	}
	if sp.Queue == "" {
		return CronRecord{}, invalid("queue", "required")
	}
	tmpl := sp.Job
	if tmpl.Queue != "" && tmpl.Queue != sp.Queue {
		return CronRecord{}, invalid("job.queue", "%q differs from queue %q; leave it out", tmpl.Queue, sp.Queue)
	}
	if len(tmpl.After) > 0 {
		return CronRecord{}, invalid("job.after", "a periodic job cannot depend on other jobs")
	}
	tmpl.Queue = sp.Queue
	tz := sp.Timezone
	if tz == "" {
		tz = "UTC"
	}
	return CronRecord{Name: sp.Name, Spec: sp.Spec, Timezone: tz, Job: tmpl, Paused: sp.Paused}, nil
}

// checkCronLocked checks the name is free, the queue exists and the job
// template would be accepted as a job now.
func (e *Engine) checkCronLocked(rec CronRecord) error {
	if _, ok := e.crons[rec.Name]; ok {
		return conflict("name", "periodic job %q exists", rec.Name)
	}
	if _, ok := e.queues[rec.Job.Queue]; !ok {
		return invalid("queue", "unknown queue %q", rec.Job.Queue)
	}
	sp := rec.Job
	var cs sched.JobSpec
	if err := e.checkBasics(&sp, &cs); err != nil {
		return prefixed("job", err)
	}
	return nil
}

// putCronLocked stores an entry's record and wakes the clock loop.
func (e *Engine) putCronLocked(c *cronEntry) {
	rec := c.rec
	e.emit(Op{Kind: OpPutCron, Cron: &rec})
	e.refreshCronNextLocked()
	e.poke()
}

// Cron returns one periodic job.
func (e *Engine) Cron(name string) (jobtype.Cron, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.crons[name]
	if !ok {
		return jobtype.Cron{}, notFound("", "no periodic job %q", name)
	}
	return c.view(), nil
}

// Crons returns every periodic job, sorted by name.
func (e *Engine) Crons() []jobtype.Cron {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]jobtype.Cron, 0, len(e.crons))
	for _, c := range e.crons {
		out = append(out, c.view())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// UpdateCron pauses or resumes a periodic job. A paused entry makes no
// job; resumed, its next tick is the first after now: ticks while it was
// paused are skipped.
func (e *Engine) UpdateCron(ctx context.Context, name string, u jobtype.CronUpdate) (jobtype.Cron, error) {
	e.mu.Lock()
	c, ok := e.crons[name]
	if !ok {
		e.mu.Unlock()
		return jobtype.Cron{}, notFound("", "no periodic job %q", name)
	}
	if u.Paused == nil || *u.Paused == c.rec.Paused {
		view := c.view()
		e.mu.Unlock()
		return view, nil
	}
	c.rec.Paused = *u.Paused
	if !c.rec.Paused {
		c.rec.From = e.cfg.Now()
	}
	c.schedule()
	e.putCronLocked(c)
	view := c.view()
	return view, e.commit(ctx)
}

// DeleteCron removes a periodic job; the jobs it made stay.
func (e *Engine) DeleteCron(ctx context.Context, name string) error {
	e.mu.Lock()
	if _, ok := e.crons[name]; !ok {
		e.mu.Unlock()
		return notFound("", "no periodic job %q", name)
	}
	delete(e.crons, name)
	e.emit(Op{Kind: OpDeleteCron, Name: name})
	e.refreshCronNextLocked()
	return e.commit(ctx)
}

// refreshCronNextLocked recomputes the earliest next tick of all entries.
func (e *Engine) refreshCronNextLocked() {
	e.cronNext = time.Time{}
	for _, c := range e.crons {
		if !c.next.IsZero() && (e.cronNext.IsZero() || c.next.Before(e.cronNext)) {
			e.cronNext = c.next
		}
	}
}

// fireCronsLocked makes the job of every entry whose tick has come: one
// job per entry, for its latest tick at or before now, inserted together
// with the entry's new LastAt in one change (OpFireCron), so that a
// restart or a new leader, loading LastAt, never makes a tick's job
// twice.
func (e *Engine) fireCronsLocked(now time.Time) {
	if e.cronNext.IsZero() || e.cronNext.After(now) {
		return
	}
	var due []*cronEntry
	for _, c := range e.crons {
		if !c.next.IsZero() && !c.next.After(now) {
			due = append(due, c)
		}
	}
	sort.Slice(due, func(i, j int) bool { // ids in tick order, then by name
		if !due[i].next.Equal(due[j].next) {
			return due[i].next.Before(due[j].next)
		}
		return due[i].rec.Name < due[j].rec.Name
	})
	for _, c := range due {
		tick := c.latestDue(c.next, now)
		e.fireLocked(c, tick)
		c.next = c.after(tick)
	}
	e.refreshCronNextLocked()
}

// fireLocked makes an entry's job for tick. A template the engine no
// longer accepts (its queue or tier is gone) makes no job: the tick is
// logged and recorded as done, so that it is not tried again.
func (e *Engine) fireLocked(c *cronEntry, tick time.Time) {
	c.rec.LastAt = tick
	rec := c.rec
	r, cs, err := e.prepareLocked(c.rec.Job, e.nextJob)
	if err == nil {
		err = e.submitLocked([]sched.JobSpec{cs}, nil)
	}
	if err != nil {
		e.cfg.Logger.Warn("jobs: a periodic job's tick made no job", "cron", rec.Name, "tick", tick, "err", err)
		e.emit(Op{Kind: OpPutCron, Cron: &rec})
		return
	}
	e.nextJob++
	e.trackLive(r, nil)
	e.emit(Op{Kind: OpFireCron, Record: r, Cron: &rec})
}

// restoreCrons rebuilds the periodic jobs from the store. A tick missed
// while no engine ran fires at the first Tick.
func (e *Engine) restoreCrons(recs []CronRecord) error {
	e.crons = make(map[string]*cronEntry, len(recs))
	for _, r := range recs {
		c, err := newCronEntry(r)
		if err != nil {
			return fmt.Errorf("jobs: restoring periodic job %q: %w", r.Name, err)
		}
		e.crons[r.Name] = c
	}
	e.refreshCronNextLocked()
	return nil
}
