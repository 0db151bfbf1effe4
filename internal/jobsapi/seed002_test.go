package jobsapi_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
)

// Seed 002: a strict queue of read and write jobs in exclusive groups,
// run by several agents. From the agents' own timestamps: no two jobs of
// a group overlap, no read overlaps a write, and no job started before
// the agent that ran an earlier-requested job even asked for it (nothing
// overtakes a blocked head).
func TestSeed002ReadWriteGroupsWithAgents(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "db", "order": "strict"})
	rng := rand.New(rand.NewPCG(2, 2))
	const n = 120
	jobs := make([]map[string]any, n)
	meta := map[string][2]string{}
	for i := range jobs {
		g, m := fmt.Sprintf("g%d", rng.IntN(4)), []string{"read", "write"}[rng.IntN(2)]
		jobs[i] = map[string]any{"queue": "db", "group": g, "mode": m}
	}
	ids := enqueue(t, s, jobs...)
	order := map[string]int{}
	for i, id := range ids {
		order[id] = i
		meta[id] = [2]string{jobs[i]["group"].(string), jobs[i]["mode"].(string)}
	}
	stop := runAgents(t, s, 3, 2, func(leasedJob) (int, string) {
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
	checkIdle(t, s)
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
