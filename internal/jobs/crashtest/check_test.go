package crashtest

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// maxProblems caps the problems one check reports.
const maxProblems = 40

// report is what check found.
type report struct {
	problems []string
	outcomes string // executions by outcome
	retries  int    // attempts beyond the first, over all jobs
}

func (r *report) addf(format string, args ...any) {
	switch {
	case len(r.problems) < maxProblems:
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	case len(r.problems) == maxProblems:
		r.problems = append(r.problems, "(more problems left out)")
	}
}

// checker holds what the checks share.
type checker struct {
	report
	plan   *plan
	jobs   map[string]apiJob
	byJob  map[string][]*execution // every execution of a job
	final  map[string]*execution   // the execution whose success the server kept
	agents map[string]*agent
}

// check compares the server's final state with the plan, and the agents'
// executions with the rules. The execution that counts for a job is the
// one of the attempt the server shows as its last (a job that succeeded
// ends with the attempt that succeeded; attempt numbers are never reused,
// since a restart gives an interrupted job the next number). Executions
// the server ignored may overlap anything: after a crash, delivery is at
// least once.
func check(p *plan, jobs map[string]apiJob, execs []execution, agents []*agent) report {
	c := &checker{plan: p, jobs: jobs, byJob: map[string][]*execution{}, final: map[string]*execution{}, agents: map[string]*agent{}}
	for _, a := range agents {
		c.agents[a.name] = a
	}
	for i := range execs {
		c.byJob[execs[i].job] = append(c.byJob[execs[i].job], &execs[i])
	}
	c.checkJobs()
	c.checkExecutions()
	c.checkDependencies()
	c.checkGates()
	counts := map[outcome]int{}
	for _, x := range execs {
		counts[x.outcome]++
	}
	var parts []string
	for o := accepted; o <= dropped; o++ {
		parts = append(parts, fmt.Sprintf("%d %s", counts[o], o))
	}
	c.outcomes = strings.Join(parts, ", ")
	return c.report
}

// checkJobs: every submitted job is there, once, succeeded, as submitted.
func (c *checker) checkJobs() {
	if len(c.jobs) != len(c.plan.jobs) {
		c.addf("the server lists %d jobs; %d were submitted", len(c.jobs), len(c.plan.jobs))
	}
	for id := range c.jobs {
		if _, ok := c.plan.byID[id]; !ok {
			c.addf("job %s: listed, never submitted", id)
		}
	}
	for _, pj := range c.plan.jobs {
		j, ok := c.jobs[pj.id]
		switch {
		case !ok:
			c.addf("job %s (%s #%d): lost", pj.id, pj.spec.Queue, pj.spec.Payload.Seq)
			continue
		case j.State != "succeeded":
			c.addf("job %s (%s #%d): state %q; want succeeded", pj.id, pj.spec.Queue, pj.spec.Payload.Seq, j.State)
		}
		got := jobSpec{Queue: j.Queue, Payload: j.Payload, Keys: j.Keys, Group: j.Group, Mode: j.Mode}
		want := jobSpec{Queue: pj.spec.Queue, Payload: pj.spec.Payload, Keys: pj.spec.Keys, Group: pj.spec.Group, Mode: pj.spec.Mode}
		if !reflect.DeepEqual(got, want) {
			c.addf("job %s: stored as %+v; submitted as %+v", pj.id, got, want)
		}
		c.retries += max(j.Attempt-1, 0)
	}
}

// checkExecutions: every execution is of a known job with its payload, on
// an agent that may serve its queue; at most one report per job was
// accepted, and it is the one of the job's last attempt.
func (c *checker) checkExecutions() {
	for id, xs := range c.byJob {
		i, ok := c.plan.byID[id]
		if !ok {
			c.addf("an agent ran job %s, which nobody submitted", id)
			continue
		}
		pj := c.plan.jobs[i]
		c.checkRuns(pj, xs)
	}
	for _, pj := range c.plan.jobs {
		j, ok := c.jobs[pj.id]
		if !ok {
			continue
		}
		c.checkFinal(j, c.byJob[pj.id])
	}
}

func (c *checker) checkRuns(pj plannedJob, xs []*execution) {
	attempts := map[int]bool{}
	for _, x := range xs {
		if attempts[x.attempt] {
			c.addf("job %s: attempt %d handed out twice", pj.id, x.attempt)
		}
		attempts[x.attempt] = true
		if x.queue != pj.spec.Queue || !reflect.DeepEqual(x.payload, pj.spec.Payload) {
			c.addf("job %s attempt %d: leased from queue %s with payload %+v; submitted to %s with %+v",
				pj.id, x.attempt, x.queue, x.payload, pj.spec.Queue, pj.spec.Payload)
		}
		for _, capability := range requires(pj.spec.Queue) {
			if a := c.agents[x.agent]; a == nil || !slices.Contains(a.caps, capability) {
				c.addf("job %s attempt %d: leased to %s, which does not offer %q", pj.id, x.attempt, x.agent, capability)
			}
		}
	}
}

func (c *checker) checkFinal(j apiJob, xs []*execution) {
	var acceptedRuns []*execution
	var final *execution
	for _, x := range xs {
		if x.outcome == accepted {
			acceptedRuns = append(acceptedRuns, x)
		}
		if x.attempt == j.Attempt {
			final = x
		}
	}
	if len(acceptedRuns) > 1 {
		c.addf("job %s: %d completions accepted (attempts %s); want at most one", j.ID, len(acceptedRuns), attemptList(acceptedRuns))
	}
	switch {
	case final == nil:
		c.addf("job %s: succeeded with attempt %d, which no agent ran (ran: %s)", j.ID, j.Attempt, attemptList(xs))
		return
	case final.agent != j.Agent:
		c.addf("job %s: attempt %d ran on %s; the server says %s", j.ID, j.Attempt, final.agent, j.Agent)
	case final.outcome != accepted && final.outcome != uncertain:
		c.addf("job %s: succeeded with attempt %d, whose completion the server %s", j.ID, j.Attempt, final.outcome)
	case len(acceptedRuns) == 1 && acceptedRuns[0] != final:
		c.addf("job %s: the server accepted attempt %d but kept attempt %d", j.ID, acceptedRuns[0].attempt, j.Attempt)
	}
	c.final[j.ID] = final
}

func attemptList(xs []*execution) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%d on %s (%s)", x.attempt, x.agent, x.outcome))
	}
	return strings.Join(parts, ", ")
}

// checkDependencies: no execution of a job, accepted or not, started
// before the accepted execution of each of its dependencies ended (the
// server hands a job out only after its dependencies' success is durable).
func (c *checker) checkDependencies() {
	for _, pj := range c.plan.jobs {
		for _, d := range pj.deps {
			dep := c.final[c.plan.jobs[d].id]
			if dep == nil {
				continue // reported as lost or never run
			}
			for _, x := range c.byJob[pj.id] {
				if x.start <= dep.end {
					c.addf("job %s attempt %d started at %s, before its dependency %s (attempt %d) ended at %s",
						pj.id, x.attempt, x.start, dep.job, dep.attempt, dep.end)
				}
			}
		}
	}
}

// checkGates: among the executions the server kept, no key ran over its
// limit, no group ran two jobs, and reads never ran with writes.
func (c *checker) checkGates() {
	type event struct {
		at    time.Duration
		start bool
		x     *execution
	}
	var events []event
	for _, x := range c.final {
		events = append(events, event{x.start, true, x}, event{x.end, false, x})
	}
	sort.Slice(events, func(i, k int) bool {
		if events[i].at != events[k].at {
			return events[i].at < events[k].at
		}
		return !events[i].start && events[k].start // an end before a start at the same instant
	})
	g := newGateCount()
	for _, ev := range events {
		if ev.start {
			if msg := g.start(ev.x); msg != "" {
				c.addf("at %s: %s", ev.at, msg)
			}
		} else {
			g.end(ev.x)
		}
	}
}

// gateCount is what runs at one instant of the sweep.
type gateCount struct {
	keys   map[string][]*execution
	groups map[string][]*execution
	modes  map[string][]*execution
}

func newGateCount() *gateCount {
	return &gateCount{keys: map[string][]*execution{}, groups: map[string][]*execution{}, modes: map[string][]*execution{}}
}

// start adds x and says which rule it broke, if any.
func (g *gateCount) start(x *execution) string {
	var broken []string
	for _, k := range x.payload.Keys {
		g.keys[k] = append(g.keys[k], x)
		if l := limitOf(k); l > 0 && len(g.keys[k]) > l {
			broken = append(broken, fmt.Sprintf("key %s (limit %d) held by %s", k, l, runs(g.keys[k])))
		}
	}
	if grp := x.payload.Group; grp != "" {
		g.groups[grp] = append(g.groups[grp], x)
		if len(g.groups[grp]) > 1 {
			broken = append(broken, fmt.Sprintf("group %s held by %s", grp, runs(g.groups[grp])))
		}
	}
	if m := x.payload.Mode; m != "" {
		g.modes[m] = append(g.modes[m], x)
		if len(g.modes["read"]) > 0 && len(g.modes["write"]) > 0 {
			broken = append(broken, fmt.Sprintf("reads %s run with writes %s", runs(g.modes["read"]), runs(g.modes["write"])))
		}
	}
	return strings.Join(broken, "; ")
}

func (g *gateCount) end(x *execution) {
	remove := func(m map[string][]*execution, k string) {
		m[k] = slices.DeleteFunc(m[k], func(y *execution) bool { return y == x })
	}
	for _, k := range x.payload.Keys {
		remove(g.keys, k)
	}
	if x.payload.Group != "" {
		remove(g.groups, x.payload.Group)
	}
	if x.payload.Mode != "" {
		remove(g.modes, x.payload.Mode)
	}
}

func runs(xs []*execution) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%s#%d[%s-%s]", x.job, x.attempt, x.start, x.end))
	}
	return strings.Join(parts, " ")
}
