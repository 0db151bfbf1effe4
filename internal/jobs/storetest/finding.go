package storetest

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// labelPool holds the tags and keys the finding tests give their jobs:
// some hold the metacharacters of SQL patterns, of Redis and of JSON,
// which a listing must take as plain text.
var labelPool = []string{"a", "ab", "abc", "b", "a%", "a_b", `x'y`, `"q"`, "*", `b\`, "ü-2", "[1]", "a%b"}

// A listing finds jobs by tag, key, text query and creation time, alone
// and with the other conditions, in both orders, through pages of any
// size and through scans capped below the number of jobs; each answer
// equals a plain filter over a model of the jobs.
func testFinding(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	rng := rand.New(rand.NewPCG(7, 23))
	type model struct {
		id      int64
		queue   string
		state   jobtype.State
		spec    jobtype.JobSpec
		created time.Time
	}
	var all []model
	var ops []jobs.Op
	states := []jobtype.State{jobtype.StateQueued, jobtype.StateRunning, jobtype.StateSucceeded, jobtype.StateFailed}
	base := time.UnixMilli(1700000000000)
	for id := int64(1); id <= 90; id++ {
		m := model{id: id, queue: []string{"a", "b"}[rng.IntN(2)], state: states[rng.IntN(len(states))],
			created: base.Add(time.Duration(id) * time.Second)}
		m.spec = jobtype.JobSpec{Queue: m.queue, Tier: "fast", TimeoutMs: 60000,
			Tags: pick(rng, 3), Keys: pick(rng, 2)}
		all = append(all, m)
		ops = append(ops, jobs.Op{Kind: jobs.OpInsert, Record: &jobs.Record{ID: id, Spec: m.spec, CreatedAt: m.created}})
		if m.state != jobtype.StateQueued {
			ops = append(ops, jobs.Op{Kind: jobs.OpStart, ID: id, Attempt: 1, Agent: "a", At: m.created})
		}
		if m.state.Final() {
			ops = append(ops, jobs.Op{Kind: jobs.OpFinish, ID: id, State: m.state, At: m.created})
		}
	}
	Apply(t, s, ops...)
	if j := job(t, s, 5); !slices.Equal(j.Tags, all[4].spec.Tags) {
		t.Fatalf("job 5's tags = %q; want %q", j.Tags, all[4].spec.Tags)
	}
	for i := range 60 {
		f := jobs.Filter{Desc: rng.IntN(2) == 0, Scan: []int{0, 4, 13}[rng.IntN(3)]}
		switch i % 6 {
		case 0:
			f.Tag = labelPool[rng.IntN(len(labelPool))]
		case 1:
			f.Key = labelPool[rng.IntN(len(labelPool))]
		case 2:
			f.Query = []string{"a", "a%", "a_", "x'", `"`, "*", `b\`, "ü", "[", "17", "0", "' OR 1=1 --"}[rng.IntN(12)]
		case 3:
			f.From = base.Add(time.Duration(rng.IntN(90)) * time.Second)
			f.To = f.From.Add(time.Duration(rng.IntN(40)) * time.Second)
		case 4:
			f.Tag, f.Queue = labelPool[rng.IntN(len(labelPool))], "b"
		case 5:
			f.Key, f.State, f.Query = labelPool[rng.IntN(len(labelPool))], states[rng.IntN(len(states))], "a"
		}
		var want []string
		for _, m := range all {
			if (f.Queue == "" || f.Queue == m.queue) && (f.State == "" || f.State == m.state) &&
				f.MatchesLabels(m.id, &m.spec, m.created) {
				want = append(want, strconv.FormatInt(m.id, 10))
			}
		}
		if f.Desc {
			slices.Reverse(want)
		}
		for _, limit := range []int{1, 7, 1000} {
			if got := pages(t, s, f, limit); !slices.Equal(got, want) {
				t.Errorf("filter %+v in pages of %d: %v; want %v", f, limit, got, want)
			}
		}
	}
	testDelete(t, s)
}

// A delete removes a finished job, which no listing finds again; an
// unfinished job stays.
func testDelete(t *testing.T, s jobs.Store) {
	before := pages(t, s, jobs.Filter{Tag: "a"}, 1000)
	if len(before) < 2 {
		t.Fatalf("tag a: %v; want at least two jobs", before)
	}
	var finished, unfinished string
	for _, id := range before {
		n, _ := strconv.ParseInt(id, 10, 64)
		if job(t, s, n).State.Final() {
			finished = id
		} else {
			unfinished = id
		}
	}
	for _, id := range []string{finished, unfinished} {
		if id == "" {
			continue
		}
		n, _ := strconv.ParseInt(id, 10, 64)
		Apply(t, s, jobs.Op{Kind: jobs.OpDelete, ID: n})
	}
	after := pages(t, s, jobs.Filter{Tag: "a"}, 1000)
	if finished != "" && slices.Contains(after, finished) {
		t.Errorf("deleted job %s is still listed under its tag: %v", finished, after)
	}
	if unfinished != "" && !slices.Contains(after, unfinished) {
		t.Errorf("unfinished job %s went with a delete: %v", unfinished, after)
	}
	if finished != "" && slices.Contains(pages(t, s, jobs.Filter{Query: finished}, 10), finished) {
		t.Errorf("deleted job %s is still found by its id", finished)
	}
}

// pick draws up to n distinct labels.
func pick(rng *rand.Rand, n int) []string {
	var out []string
	for range rng.IntN(n + 1) {
		l := labelPool[rng.IntN(len(labelPool))]
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}
