package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// The workload: four queues, key limits on "net:" keys, workflows of
// diamonds, and plain jobs with keys, groups and read/write modes.
const (
	netKeys   = 16 // net:10.0.0.0/24 … net:10.0.15.0/24
	dbGroups  = 8  // db0 … db7
	diamonds  = 10 // per workflow: 3·diamonds+1 jobs
	wfEvery   = 500
	batchSize = 1000 // jobs per POST /v1/jobs
)

// retry gives every job enough attempts that the kills (each costs the
// running jobs one attempt) never exhaust them.
var retry = retryPolicy{MaxAttempts: 20, BackoffMs: 5, MaxBackoffMs: 200}

type retryPolicy struct {
	MaxAttempts  int   `json:"maxAttempts"`
	BackoffMs    int64 `json:"backoffMs"`
	MaxBackoffMs int64 `json:"maxBackoffMs"`
}

type queueSpec struct {
	Name     string      `json:"name"`
	Priority int         `json:"priority"`
	Requires []string    `json:"requires,omitempty"`
	Order    string      `json:"order"`
	Batch    int         `json:"batch"`
	Retry    retryPolicy `json:"retry"`
}

var queues = []queueSpec{
	{Name: "net", Priority: 10, Order: "random", Batch: 4, Retry: retry},
	{Name: "db", Priority: 5, Requires: []string{"db"}, Order: "fifo", Batch: 2, Retry: retry},
	{Name: "flow", Priority: 5, Order: "fifo", Retry: retry},
	{Name: "bulk", Order: "fifo", Batch: 8, Retry: retry},
}

// keyLimit is PUT /v1/limits: an exact key, or a prefix ending in '*'.
type keyLimit struct {
	Pattern string `json:"pattern"`
	Limit   int    `json:"limit"`
}

var limits = []keyLimit{
	{Pattern: "net:*", Limit: 3},
	{Pattern: "net:10.0.1*", Limit: 2}, // net:10.0.1.0/24 and net:10.0.10.0/24 … 15
	{Pattern: "net:10.0.0.0/24", Limit: 1},
}

// limitOf resolves a key's limit as docs/api.md says: an exact key's own
// limit wins, then the longest pattern; 0 means unlimited.
func limitOf(key string) int {
	best, bestLen := 0, -1
	for _, l := range limits {
		if l.Pattern == key {
			return l.Limit
		}
		if p, ok := strings.CutSuffix(l.Pattern, "*"); ok && strings.HasPrefix(key, p) && len(p) > bestLen {
			best, bestLen = l.Limit, len(p)
		}
	}
	return best
}

// payload is what every job carries to its agent: its place in the plan
// and the gates it holds, so that the agent records them.
type payload struct {
	Seq   int      `json:"seq"`
	Keys  []string `json:"keys,omitempty"`
	Group string   `json:"group,omitempty"`
	Mode  string   `json:"mode,omitempty"`
}

// jobSpec is a job as submitted (Name only in workflows).
type jobSpec struct {
	Name     string       `json:"name,omitempty"`
	Queue    string       `json:"queue"`
	Payload  payload      `json:"payload"`
	Priority int          `json:"priority,omitempty"`
	Keys     []string     `json:"keys,omitempty"`
	Group    string       `json:"group,omitempty"`
	Mode     string       `json:"mode,omitempty"`
	After    []string     `json:"after,omitempty"`
	Retry    *retryPolicy `json:"retry,omitempty"`
}

type edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type workflowSpec struct {
	Name  string    `json:"name"`
	Jobs  []jobSpec `json:"jobs"`
	Edges []edge    `json:"edges,omitempty"`
}

// plannedJob is one job of the plan; id is the server's.
type plannedJob struct {
	spec jobSpec
	deps []int // plan indexes of the jobs it runs after
	id   string
}

// plan is the whole workload.
type plan struct {
	jobs      []plannedJob
	byID      map[string]int
	workflows []plannedWorkflow
}

type plannedWorkflow struct {
	spec  workflowSpec
	first int // plan index of its first job
	id    string
}

// newPlan makes n jobs: a workflow of diamonds per wfEvery jobs, the rest
// plain jobs in the net, db and bulk queues.
func newPlan(rng *rand.Rand, n int) (*plan, error) {
	perWF := 3*diamonds + 1
	nWF := max(1, n/wfEvery)
	if n < nWF*perWF+10 {
		return nil, fmt.Errorf("%d jobs are too few: the workflows alone take %d", n, nWF*perWF)
	}
	p := &plan{byID: map[string]int{}}
	for w := range nWF {
		p.addWorkflow(rng, w)
	}
	for len(p.jobs) < n {
		p.add(plainJob(rng, len(p.jobs)), nil)
	}
	return p, nil
}

func (p *plan) add(s jobSpec, deps []int) {
	s.Payload.Seq, s.Payload.Keys, s.Payload.Group, s.Payload.Mode = len(p.jobs), s.Keys, s.Group, s.Mode
	p.jobs = append(p.jobs, plannedJob{spec: s, deps: deps})
}

// addWorkflow plans a chain of diamonds: top_i → left_i, right_i →
// top_{i+1}. The first edges are given by "after", the joins of odd
// diamonds by "edges".
func (p *plan) addWorkflow(rng *rand.Rand, w int) {
	wf := plannedWorkflow{spec: workflowSpec{Name: fmt.Sprintf("diamonds-%d", w)}, first: len(p.jobs)}
	index := map[string]int{}
	node := func(name string, after ...string) {
		s := jobSpec{Name: name, Queue: "flow", After: after}
		if rng.IntN(3) == 0 {
			s.Keys = []string{netKey(rng.IntN(netKeys))}
		}
		if rng.IntN(4) == 0 {
			s.Retry = &retryPolicy{MaxAttempts: 25, BackoffMs: 1}
		}
		var deps []int
		for _, a := range after {
			deps = append(deps, index[a])
		}
		index[name] = len(p.jobs)
		p.add(s, deps)
	}
	node("top0")
	for i := range diamonds {
		top, left, right, next := fmt.Sprintf("top%d", i), fmt.Sprintf("left%d", i), fmt.Sprintf("right%d", i), fmt.Sprintf("top%d", i+1)
		node(left, top)
		node(right, top)
		if i%2 == 0 {
			node(next, left, right)
			continue
		}
		node(next)
		wf.spec.Edges = append(wf.spec.Edges, edge{From: left, To: next}, edge{From: right, To: next})
		p.jobs[index[next]].deps = []int{index[left], index[right]}
	}
	for i := wf.first; i < len(p.jobs); i++ {
		wf.spec.Jobs = append(wf.spec.Jobs, p.jobs[i].spec)
	}
	p.workflows = append(p.workflows, wf)
}

func netKey(k int) string { return fmt.Sprintf("net:10.0.%d.0/24", k) }

// plainJob is a job of the net (keys), db (group and mode) or bulk queue.
func plainJob(rng *rand.Rand, seq int) jobSpec {
	switch r := rng.IntN(10); {
	case r < 4:
		keys := []string{netKey(rng.IntN(netKeys))}
		if rng.IntN(5) == 0 {
			if k := netKey(rng.IntN(netKeys)); k != keys[0] {
				keys = append(keys, k)
			}
		}
		return jobSpec{Queue: "net", Keys: keys}
	case r < 6:
		mode := "read"
		if rng.IntN(4) == 0 {
			mode = "write"
		}
		return jobSpec{Queue: "db", Group: fmt.Sprintf("db%d", rng.IntN(dbGroups)), Mode: mode}
	default:
		s := jobSpec{Queue: "bulk", Priority: rng.IntN(3) - 1}
		if seq%7 == 0 {
			s.Retry = &retryPolicy{MaxAttempts: 30}
		}
		return s
	}
}

// setUp creates the queues and key limits (admin).
func setUp(ctx context.Context, admin *client) error {
	for _, q := range queues {
		if err := admin.must(ctx, "POST", "/v1/queues", q, nil, 201); err != nil {
			return fmt.Errorf("creating queue %s: %w", q.Name, err)
		}
	}
	for _, l := range limits {
		if err := admin.must(ctx, "PUT", "/v1/limits", l, nil, 200); err != nil {
			return fmt.Errorf("setting limit %s: %w", l.Pattern, err)
		}
	}
	return nil
}

// newToken creates a token of a role and returns its secret.
func newToken(ctx context.Context, admin *client, name, role string) (string, error) {
	var ans struct {
		Token string `json:"token"`
	}
	if err := admin.must(ctx, "POST", "/v1/tokens", map[string]string{"name": name, "role": role}, &ans, 201); err != nil {
		return "", fmt.Errorf("creating the %s token: %w", role, err)
	}
	return ans.Token, nil
}

// submit sends the workflows, then the plain jobs in batches, and records
// the ids the server gave.
func (p *plan) submit(ctx context.Context, c *client) error {
	inWF := 0
	for i := range p.workflows {
		if err := p.submitWorkflow(ctx, c, &p.workflows[i]); err != nil {
			return err
		}
		inWF += len(p.workflows[i].spec.Jobs)
	}
	for start := inWF; start < len(p.jobs); start += batchSize {
		end := min(start+batchSize, len(p.jobs))
		specs := make([]jobSpec, 0, end-start)
		for _, j := range p.jobs[start:end] {
			specs = append(specs, j.spec)
		}
		var ans struct {
			IDs []string `json:"ids"`
		}
		if err := c.must(ctx, "POST", "/v1/jobs", map[string]any{"jobs": specs}, &ans, 201); err != nil {
			return fmt.Errorf("submitting jobs %d-%d: %w", start, end-1, err)
		}
		if len(ans.IDs) != end-start {
			return fmt.Errorf("submitting %d jobs: %d ids back", end-start, len(ans.IDs))
		}
		for k, id := range ans.IDs {
			p.setID(start+k, id)
		}
	}
	if len(p.byID) != len(p.jobs) {
		return fmt.Errorf("%d jobs submitted, %d distinct ids", len(p.jobs), len(p.byID))
	}
	return nil
}

func (p *plan) submitWorkflow(ctx context.Context, c *client, wf *plannedWorkflow) error {
	var ans struct {
		ID   string            `json:"id"`
		Jobs map[string]string `json:"jobs"`
	}
	if err := c.must(ctx, "POST", "/v1/workflows", wf.spec, &ans, 201); err != nil {
		return fmt.Errorf("submitting workflow %s: %w", wf.spec.Name, err)
	}
	wf.id = ans.ID
	for k, j := range wf.spec.Jobs {
		id, ok := ans.Jobs[j.Name]
		if !ok {
			return fmt.Errorf("workflow %s: no id for job %s in %v", wf.spec.Name, j.Name, ans.Jobs)
		}
		p.setID(wf.first+k, id)
	}
	return nil
}

func (p *plan) setID(i int, id string) {
	p.jobs[i].id = id
	p.byID[id] = i
}

// requires says which capabilities a queue needs.
func requires(queue string) []string {
	for _, q := range queues {
		if q.Name == queue {
			return slices.Clone(q.Requires)
		}
	}
	return nil
}
