package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testwait"
)

// takeover is the longest a standby may take to lead after the leader died.
const takeover = 5 * time.Second

// leaderOf waits until exactly one of the nodes leads and returns it and
// the other.
func (e *env) leaderOf(a, b *node) (leader, standby *node) {
	e.t.Helper()
	e.waitFor("one scheduler leads", wait, func() bool { return e.status(a).Leading || e.status(b).Leading })
	sa, sb := e.status(a), e.status(b)
	if sa.Leading == sb.Leading {
		e.t.Fatalf("both lead or neither: %+v %+v", sa.Leading, sb.Leading)
	}
	if tok := e.rdb.Get(e.ctx(), e.keys.Leader()).Val(); tok != sa.Token+sb.Token {
		e.t.Fatalf("scheduler.leader holds %q", tok)
	}
	if sa.Leading {
		return a, b
	}
	return b, a
}

// epoch reads the EPOCH of a token EPOCH:NODE.
func epoch(t testing.TB, token string) int {
	t.Helper()
	s, _, _ := strings.Cut(token, ":")
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("token %q: %v", token, err)
	}
	return n
}

// Two schedulers: one leads; the leader crashes (its context ends and it
// never gives the lease up) and the standby leads within 5 s with the same
// queued and running tasks, then goes on deciding.
func TestTwoSchedulersStandbyTakesOverAfterCrash(t *testing.T) {
	e := newEnv(t)
	e.addBackends(2, time.Minute)
	lead, standby := e.leaderOf(e.startScheduler("a", nil), e.startScheduler("b", nil))
	s1, f1 := e.submit(30000, false), e.submit(3000, false)
	e.waitFor("two running", wait, func() bool { return len(e.outcoming()) == 2 })
	e.takeTask("b1")
	e.takeTask("b2")
	s2, m1, f2, d := e.submit(30000, false), e.submit(10000, false), e.submit(3000, false), e.submit(0, false)
	e.waitFor("four queued", wait, func() bool { return e.status(lead).Core.Queued == 4 })
	before, redisBefore, execBefore := e.status(lead), e.queued(), e.executing()
	if !slices.Equal(before.Queued, []string{s2, m1, f2, d}) || len(before.Running) != 2 ||
		before.Running[s1] != "slow" || before.Running[f1] != "fast" {
		t.Fatalf("leader's state before the crash: %+v", before)
	}

	lead.crash(t)
	died := time.Now()
	e.waitLeading(standby, takeover)
	if took := time.Since(died); took > takeover {
		t.Fatalf("standby led after %v", took)
	}
	after := e.status(standby)
	if after.Invariants != nil {
		t.Fatalf("core invariants after the rebuild: %v", after.Invariants)
	}
	if epoch(t, after.Token) <= epoch(t, before.Token) {
		t.Fatalf("token %s after %s", after.Token, before.Token)
	}
	if !slices.Equal(after.Queued, before.Queued) || !maps.Equal(after.Running, before.Running) {
		t.Fatalf("state after the takeover: queued %v running %v; before: %v %v", after.Queued, after.Running, before.Queued, before.Running)
	}
	for k, tu := range after.Core.Tiers {
		if tu.Running != before.Core.Tiers[k].Running || tu.Limit != before.Core.Tiers[k].Limit {
			t.Fatalf("tier %d: %+v, before %+v", k, tu, before.Core.Tiers[k])
		}
	}
	if !slices.Equal(e.queued(), redisBefore) || !maps.Equal(e.executing(), execBefore) {
		t.Fatalf("Redis changed: queue %v executing %v", e.queued(), e.executing())
	}
	e.finish(f1)
	e.waitFor("the new leader starts the next fast task", wait, func() bool { return slices.Contains(e.outcoming(), f2) })
	e.checkLimits(1, 1)
}

// A leader that resigns hands over at once.
func TestResignHandsOverAtOnce(t *testing.T) {
	e := newEnv(t)
	lead, standby := e.leaderOf(e.startScheduler("a", nil), e.startScheduler("b", nil))
	lead.crash(t)
	if err := lead.s.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitLeading(standby, 2*time.Second)
}

// A leader whose loop is held up mid-step while its lease is lost (here
// a Redis stall longer than the lease; another takes over after it)
// cannot write when the step goes on: the fence refuses its script, its
// renewal is refused, and it stands by.
func TestPausedLeaderIsFenced(t *testing.T) {
	srv := redistest.Start(t, redistest.DebugArgs...)
	e := envOn(t, srv.URL())
	a := e.startScheduler("a", nil)
	e.waitLeading(a, wait)
	tokenA := e.status(a).Token
	paused := make(chan struct{})
	resume := make(chan struct{})
	results := make(chan [2]error, 1)
	go func() {
		_ = a.s.do(context.Background(), func(l *leader) {
			close(paused)
			<-resume
			l.ops = []op{{kind: "deny", id: "victim", b: "denied from a paused leader"}}
			_, ferr := l.flush(context.Background())
			var rerr error
			r := a.s.renewOn(context.Background(), nil, l.token)
			if r.err != nil || r.held {
				rerr = fmt.Errorf("renewal: held %v, err %v", r.held, r.err)
			}
			if r.conn != nil {
				_ = r.conn.Close()
			}
			results <- [2]error{ferr, rerr}
		})
	}()
	testwait.Receive(t, 30*time.Second, paused, "the old leader paused before the flush")
	if err := srv.Stall(context.Background(), 4*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	b := e.startScheduler("b", nil)
	e.waitLeading(b, takeover)
	tokenB := e.status(b).Token
	e.submitHash("victim", map[string]any{"duration": "3000"})
	close(resume)
	res := testwait.Receive(t, 30*time.Second, results, "the paused leader's writes returning")
	if !errors.Is(res[0], errFenced) {
		t.Fatalf("paused leader's write: %v, want fenced", res[0])
	}
	if res[1] != nil {
		t.Fatalf("paused leader's %v; want refused", res[1])
	}
	if c := e.control("victim"); slices.Contains(c, "denied from a paused leader") {
		t.Fatalf("the paused leader wrote: %v", c)
	}
	e.waitFor("the old leader stands by", wait, func() bool { return !e.status(a).Leading })
	if !e.logs.Contains(`msg="stepped down" node=a token=` + tokenA + ` reason="lost the lease: it lapsed`) {
		t.Fatalf("the old leader did not step down when its lease lapsed:\n%s", e.logs)
	}
	if tok := e.rdb.Get(e.ctx(), e.keys.Leader()).Val(); tok != tokenB || !e.status(b).Leading {
		t.Fatalf("scheduler.leader %q, want %q", tok, tokenB)
	}
	e.waitFor("the new leader queued the task", wait, func() bool { return slices.Equal(e.queued(), []string{"victim"}) })
}

// The basic flow and a failover on a 3-master Redis Cluster with the
// hash-tag prefix.
func TestClusterBasicFlowAndFailover(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	e := envOn(t, c.URL())
	e.addBackends(1, time.Minute)
	lead, standby := e.leaderOf(e.startScheduler("a", nil), e.startScheduler("b", nil))
	first, second := e.submit(3000, false), e.submit(10000, false)
	e.waitFor("first task out", wait, func() bool { return slices.Equal(e.outcoming(), []string{first}) })
	e.waitFor("second queued with an estimate", wait, func() bool {
		return e.rdb.LLen(e.ctx(), e.keys.TaskEstimate(second)).Val() > 0
	})
	if got := e.takeTask("b1"); got != first {
		t.Fatalf("took %s", got)
	}
	lead.crash(t)
	e.waitLeading(standby, takeover)
	e.finish(first)
	e.waitFor("second task out", wait, func() bool { return slices.Contains(e.outcoming(), second) })
	if ex := e.executing(); len(ex) != 1 || ex[second] != "10000" {
		t.Fatalf("executing %v", ex)
	}
}

// A standby adopts a running default task in the tier it holds and a
// running interactive task; the tier rules then apply to them: a slow
// head downgrades the default task to fast and, with no free backend,
// halts the interactive one.
func TestStandbyAdoptsDefaultAndInteractiveTasks(t *testing.T) {
	e := newEnv(t)
	e.addBackends(2, time.Minute)
	lead, standby := e.leaderOf(e.startScheduler("a", nil), e.startScheduler("b", nil))
	d := e.submit(0, false)
	e.waitFor("default task out", wait, func() bool { return e.executing()[d] == "30000" })
	i := e.submit(0, true)
	e.waitFor("interactive task out", wait, func() bool { return e.executing()[i] == "interactive" })
	lead.crash(t)
	e.waitLeading(standby, takeover)
	st := e.status(standby)
	if !maps.Equal(st.Running, map[string]string{d: "slow", i: "interactive"}) || st.Core.Interactive != 1 {
		t.Fatalf("adopted %v, %d interactive", st.Running, st.Core.Interactive)
	}
	s := e.submit(30000, false)
	e.waitFor("slow task out", wait, func() bool { return e.executing()[s] == "30000" })
	if c := e.control(d); !slices.Equal(c, []string{"timeout 3000"}) {
		t.Fatalf("control of the default task %v", c)
	}
	if c := e.control(i); !slices.Equal(c, []string{"end " + asyqueue.HaltedText}) {
		t.Fatalf("control of the interactive task %v", c)
	}
	if ex := e.executing(); !maps.Equal(ex, map[string]string{d: "3000", s: "30000"}) {
		t.Fatalf("executing %v", ex)
	}
}

// When the last backend's heartbeat expires, the tasks it ran end with
// "Backend went away during the task" and new tasks wait for a backend.
func TestLastBackendGoneEndsItsTasks(t *testing.T) {
	e := newEnv(t)
	b := e.addBackends(1, time.Minute)[0]
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	id := e.submit(3000, false)
	e.waitFor("task out", wait, func() bool { return slices.Contains(e.outcoming(), id) })
	e.takeTask("b1")
	e.rdb.Del(e.ctx(), e.keys.Backend(b))
	e.waitFor("task ended", wait, func() bool { return len(e.control(id)) == 1 })
	if c := e.control(id)[0]; c != "end "+asyqueue.BackendLostText {
		t.Fatalf("control %q", c)
	}
	if st := e.status(n); st.Core.Slots != 0 || st.Core.Running != 0 || len(e.executing()) != 0 {
		t.Fatalf("slots %d running %d executing %v", st.Core.Slots, st.Core.Running, e.executing())
	}
	next := e.submit(3000, false)
	e.waitFor("next task queued", wait, func() bool { return slices.Equal(e.queued(), []string{next}) })
	e.addBackends(1, time.Minute)
	e.waitFor("next task out once a backend came", wait, func() bool { return slices.Contains(e.outcoming(), next) })
}
