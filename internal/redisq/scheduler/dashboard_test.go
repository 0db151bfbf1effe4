package scheduler

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testwait"
)

// fastDashboard makes a scheduler publish its dashboard every 50 ms.
func fastDashboard(c *Config) { c.DashboardEvery = 50 * time.Millisecond }

// dashboard reads and parses scheduler.dashboard (ok false while absent).
func (e *env) dashboard() (dashboard.Dashboard, bool) {
	e.t.Helper()
	b, err := e.rdb.Get(e.ctx(), e.keys.Dashboard()).Bytes()
	if err != nil {
		return dashboard.Dashboard{}, false
	}
	d, err := redisq.ParseDashboard(b)
	if err != nil {
		e.t.Fatalf("scheduler.dashboard: %v", err)
	}
	return d, true
}

// waitDashboard waits for a published dashboard that satisfies cond.
func (e *env) waitDashboard(what string, cond func(dashboard.Dashboard) bool) dashboard.Dashboard {
	e.t.Helper()
	var d dashboard.Dashboard
	e.waitFor(what, wait, func() bool {
		var ok bool
		d, ok = e.dashboard()
		return ok && cond(d)
	})
	return d
}

// tookAs records, as a backend does, that backend bid took task id.
func (e *env) tookAs(id, bid string) {
	e.t.Helper()
	if err := e.rdb.HSet(e.ctx(), e.keys.Task(id), redisq.FieldBackend, bid).Err(); err != nil {
		e.t.Fatal(err)
	}
}

func queueIDs(d dashboard.Dashboard) []string {
	var ids []string
	for _, q := range d.Queue {
		ids = append(ids, q.ID)
	}
	return ids
}

// The leader's dashboard shows the deployment: tier limits from the live
// backends, the tasks running with their tier and backend, the queue in
// order with classes and estimates, the backends idle or busy, the
// downgrades and denials it decided, and the tasks that ended.
func TestLeaderPublishesTheDeploymentsDashboard(t *testing.T) {
	e := newEnv(t)
	b := e.addBackends(2, time.Minute)
	n := e.startScheduler("a", fastDashboard)
	e.waitLeading(n, wait)
	d := e.submit(0, false)
	e.waitFor("default task out", wait, func() bool { return e.executing()[d] == "30000" })
	if got := e.takeTask("b1"); got != d {
		t.Fatalf("took %s", got)
	}
	e.tookAs(d, b[0])
	s := e.submit(30000, false) // downgrades d to fast and runs
	e.waitFor("slow task out", wait, func() bool { return e.executing()[s] == "30000" })
	f, m := e.submit(3000, false), e.submit(10000, false)
	i := e.submit(0, true) // no free backend: denied
	e.waitFor("interactive task denied", wait, func() bool { return len(e.control(i)) == 1 })

	dash := e.waitDashboard("two running, two queued, two events", func(x dashboard.Dashboard) bool {
		return len(x.Running) == 2 && len(x.Queue) == 2 && len(x.Events) == 2
	})
	if tok := e.status(n).Token; dash.Leader == nil || dash.Leader.Node != "a" || dash.Leader.Token != tok {
		t.Fatalf("leader %+v, want a with %s", dash.Leader, tok)
	}
	var limits []int
	for _, tier := range dash.Tiers {
		limits = append(limits, tier.Limit)
	}
	if !slices.Equal(limits, []int{2, 1, 1}) {
		t.Fatalf("tier limits %v with 2 backends, want [2 1 1]", limits)
	}
	want := []dashboard.RunningTask{
		{ID: d, Class: "default", Tier: "fast", Backend: b[0]},
		{ID: s, Class: "slow", Tier: "slow"},
	}
	for k, r := range dash.Running {
		if r.ID != want[k].ID || r.Class != want[k].Class || r.Tier != want[k].Tier || r.Backend != want[k].Backend || r.StartedAt.IsZero() {
			t.Fatalf("running[%d] %+v, want %+v", k, r, want[k])
		}
	}
	if q := dash.Queue; !slices.Equal(queueIDs(dash), []string{f, m}) || q[0].Class != "fast" || q[1].Class != "medium" ||
		q[0].Position != 0 || q[1].Position != 1 || q[0].EstimateMS == nil || q[1].EstimateMS == nil {
		t.Fatalf("queue %+v", q)
	}
	if !slices.Equal(dash.Backends, []dashboard.Backend{{ID: b[0], State: "busy"}, {ID: b[1], State: "idle"}}) {
		t.Fatalf("backends %+v", dash.Backends)
	}
	if ev := dash.Events; ev[0].Kind != "denial" || ev[0].Task != i || ev[1].Kind != "downgrade" || ev[1].Task != d || ev[1].Detail != "slow → fast" {
		t.Fatalf("events %+v", ev)
	}
	if dash.TasksPerSecond != 0 {
		t.Fatalf("tasks per second %v before any ended", dash.TasksPerSecond)
	}
	if ttl := e.rdb.PTTL(e.ctx(), e.keys.Dashboard()).Val(); ttl <= 0 || ttl > redisq.DashboardTTL {
		t.Fatalf("scheduler.dashboard TTL %v", ttl)
	}

	e.finish(d)
	after := e.waitDashboard("the fast task running once the default one ended", func(x dashboard.Dashboard) bool {
		return slices.Equal(queueIDs(x), []string{m}) && x.TasksPerSecond > 0
	})
	if after.TasksPerSecond != 1.0/60 {
		t.Fatalf("tasks per second %v after one ended, want 1/60", after.TasksPerSecond)
	}
}

// A deposed leader cannot replace its successor's dashboard: the write is
// fenced by scheduler.leader, and the refusal makes it step down. (It is
// deposed while its loop is held up: a Redis stall longer than the lease,
// after which another takes over.)
func TestDeposedLeaderCannotReplaceTheDashboard(t *testing.T) {
	srv := redistest.Start(t, redistest.DebugArgs...)
	e := envOn(t, srv.URL())
	a := e.startScheduler("a", fastDashboard)
	e.waitLeading(a, wait)
	e.waitDashboard("a's dashboard", func(x dashboard.Dashboard) bool { return x.Leader.Node == "a" })
	paused, resume := make(chan struct{}), make(chan struct{})
	results := make(chan [2]error, 1)
	go func() {
		_ = a.s.do(context.Background(), func(l *leader) {
			close(paused)
			<-resume
			results <- [2]error{l.writeDashboard(context.Background()), l.publishDashboard(context.Background())}
		})
	}()
	testwait.Receive(t, 30*time.Second, paused, "the old leader paused before the dashboard write")
	if err := srv.Stall(context.Background(), 4*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	b := e.startScheduler("b", fastDashboard)
	e.waitLeading(b, takeover)
	e.waitDashboard("b's dashboard", func(x dashboard.Dashboard) bool { return x.Leader.Node == "b" })
	close(resume)
	res := testwait.Receive(t, 30*time.Second, results, "the paused leader's writes returning")
	if !errors.Is(res[0], errFenced) || !errors.Is(res[1], errFenced) {
		t.Fatalf("deposed leader's dashboard writes: %v, %v; want fenced", res[0], res[1])
	}
	if d, ok := e.dashboard(); !ok || d.Leader.Node != "b" || d.Leader.Token != e.status(b).Token {
		t.Fatalf("scheduler.dashboard after the deposed leader's write: %+v", d.Leader)
	}
	e.waitFor("the old leader stands by", wait, func() bool { return !e.status(a).Leading })
}

// A leader goes on deciding when it cannot write its dashboard (a foreign
// value where backend.set should be stops it from reading the backends).
func TestDashboardFailureDoesNotStopScheduling(t *testing.T) {
	e := newEnv(t)
	n := e.startScheduler("a", fastDashboard)
	e.waitLeading(n, wait)
	e.rdb.Set(e.ctx(), e.keys.BackendSet(), "garbage", 0)
	e.waitFor("the failure logged", wait, func() bool { return e.logs.Contains("cannot publish the dashboard") })
	e.rdb.Del(e.ctx(), e.keys.BackendSet())
	e.addBackends(1, time.Minute)
	id := e.submit(3000, false)
	e.waitFor("task out", wait, func() bool { return slices.Contains(e.outcoming(), id) })
	e.waitDashboard("the dashboard again", func(x dashboard.Dashboard) bool { return len(x.Running) == 1 })
	if !e.status(n).Leading {
		t.Fatal("the leader stepped down")
	}
}
