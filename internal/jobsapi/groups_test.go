package jobsapi_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
)

// A strict queue of read and write jobs in exclusive groups, run by
// several agents
// (docs/design.md, "Exclusive read/write groups and strict order").
// From the agents' own timestamps: no two jobs of a group overlap, no
// read overlaps a write, and no job started before the agent that ran an
// earlier-requested job even asked for it (nothing overtakes a blocked
// head). The queue starts with a read of every group, then a write of
// every group: the rules let each of these sets run together, and its
// jobs wait for one another before they end, so the test fails unless
// each set did run all at once.
func TestReadWriteGroupsWithAgents(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "db", "order": "strict"})
	const groups = 4
	var jobs []map[string]any
	for _, m := range []string{"read", "write"} {
		for g := range groups {
			jobs = append(jobs, map[string]any{"queue": "db", "group": fmt.Sprintf("g%d", g), "mode": m})
		}
	}
	rng := rand.New(rand.NewPCG(2, 2))
	for range 120 {
		g, m := fmt.Sprintf("g%d", rng.IntN(groups)), []string{"read", "write"}[rng.IntN(2)]
		jobs = append(jobs, map[string]any{"queue": "db", "group": g, "mode": m})
	}
	n := len(jobs)
	ids := enqueue(t, s, jobs...)
	order := map[string]int{}
	meta := map[string][2]string{}
	for i, id := range ids {
		order[id] = i
		meta[id] = [2]string{jobs[i]["group"].(string), jobs[i]["mode"].(string)}
	}
	sets := map[string]*meeting{"a read of every group": newMeeting(groups), "a write of every group": newMeeting(groups)}
	together := map[string]string{} // job ID: the set it must run with
	for i, id := range ids[:2*groups] {
		together[id] = []string{"a read of every group", "a write of every group"}[i/groups]
	}
	stop := runAgents(t, s, 3, 2, func(j leasedJob) (int, string) {
		if set, ok := together[j.ID]; ok {
			if err := sets[set].join(20 * time.Second); err != nil {
				t.Errorf("%s: %v", set, err)
			}
			return 0, ""
		}
		time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond) // the job's work (rand: safe across agents)
		return 0, ""
	})
	testwait.Eventually(t, 60*time.Second, func() bool { return finished(t, s, ids[n-1:]) && finished(t, s, ids) }, "every job finished")
	execs := stop()
	if len(execs) != n {
		t.Fatalf("%d accepted executions; want %d", len(execs), n)
	}
	for i, a := range execs {
		for _, b := range execs[i+1:] {
			checkPair(t, a, b, meta, order)
		}
	}
	for set := range sets {
		if c := maxConcurrent(execs, func(id string) bool { return together[id] == set }); c != groups {
			t.Errorf("%s: at most %d of its %d jobs ran at the same time; the rules let all run together", set, c, groups)
		}
	}
	checkIdle(t, s)
}

// meeting holds the jobs that join it until all of them are there, which
// proves that they ran at the same time. It waits without polling.
type meeting struct {
	mu      sync.Mutex
	want    int
	arrived int
	broken  bool          // a member gave up waiting: nobody waits any more
	all     chan struct{} // closed once every member arrived or one gave up
}

func newMeeting(want int) *meeting { return &meeting{want: want, all: make(chan struct{})} }

// join waits until every member joined. After timeout it gives up: it
// says how many were there, and no member waits any more (the one that
// gave up reports for all).
func (m *meeting) join(timeout time.Duration) error {
	m.mu.Lock()
	m.arrived++
	if m.arrived == m.want && !m.broken {
		close(m.all)
	}
	m.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-m.all:
		return nil
	case <-timer.C:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.arrived >= m.want || m.broken {
		return nil
	}
	m.broken = true
	close(m.all)
	return fmt.Errorf("only %d of its %d jobs ran at the same time within %v, though the rules let them run together", m.arrived, m.want, timeout)
}

// maxConcurrent is the largest number of the executions picked by in that
// ran at one instant, by the agents' timestamps.
func maxConcurrent(execs []execution, in func(id string) bool) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, e := range execs {
		if in(e.job.ID) {
			edges = append(edges, edge{e.start, 1}, edge{e.end, -1})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

func checkPair(t *testing.T, a, b execution, meta map[string][2]string, order map[string]int) {
	t.Helper()
	overlap := a.start.Before(b.end) && b.start.Before(a.end)
	ma, mb := meta[a.job.ID], meta[b.job.ID]
	if overlap && ma[0] == mb[0] {
		t.Errorf("jobs %s and %s of group %s overlapped", a.job.ID, b.job.ID, ma[0])
	}
	if overlap && ma[1] != mb[1] {
		t.Errorf("read and write overlapped: job %s (%s) and %s (%s)", a.job.ID, ma[1], b.job.ID, mb[1])
	}
	early, late := a, b
	if order[a.job.ID] > order[b.job.ID] {
		early, late = b, a
	}
	if late.start.Before(early.asked) {
		t.Errorf("job %s started before the earlier job %s was asked for", late.job.ID, early.job.ID)
	}
}
