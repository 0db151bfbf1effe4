package scheduler

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/sched"
)

const wait = 10 * time.Second

// A queue server's fast task leaves the queue for queue.outcoming, holding
// its tier in queue.executing, with started and timeout in its hash.
func TestQueueServerTaskGoesOutToBackends(t *testing.T) {
	e := newEnv(t)
	e.addBackends(1, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	id := e.submit(3000, false)
	e.waitFor("task in queue.outcoming", wait, func() bool { return slices.Equal(e.outcoming(), []string{id}) })
	if ex := e.executing(); ex[id] != "3000" || len(ex) != 1 {
		t.Fatalf("queue.executing %v", ex)
	}
	h := e.rdb.HGetAll(e.ctx(), e.keys.Task(id)).Val()
	if h[redisq.FieldTimeout] != "3000" || h[redisq.FieldStarted] == "" {
		t.Fatalf("task hash %v", h)
	}
	if q := e.queued(); len(q) != 0 {
		t.Fatalf("queue %v", q)
	}
	if n := e.rdb.LLen(e.ctx(), e.keys.Incoming()).Val(); n != 0 {
		t.Fatalf("queue.incoming holds %d", n)
	}
}

// With 2 backends the tier limits are medium 1 and slow 1: a slow task
// and a fast one run, the second slow and the medium wait; a finished fast
// task frees its slot for the next fast one, which overtakes the blocked.
func TestBackendsAndQueueServersTierLimitsHold(t *testing.T) {
	e := newEnv(t)
	e.addBackends(2, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	s1 := e.submit(30000, false)
	e.waitFor("slow task out", wait, func() bool { return len(e.outcoming()) == 1 })
	s2, m1, f1, f2 := e.submit(30000, false), e.submit(10000, false), e.submit(3000, false), e.submit(3000, false)
	e.waitFor("fast task out", wait, func() bool { return len(e.outcoming()) == 2 })
	e.waitFor("three queued", wait, func() bool { return len(e.queued()) == 3 })
	e.checkLimits(1, 1)
	if out := e.outcoming(); !sameSet(out, []string{s1, f1}) {
		t.Fatalf("outcoming %v, want %s and %s", out, s1, f1)
	}
	if q := e.queued(); !slices.Equal(q, []string{s2, m1, f2}) {
		t.Fatalf("queue %v", q)
	}
	st := e.status(n)
	if lim := st.Core.Tiers; lim[0].Limit != 2 || lim[1].Limit != 1 || lim[2].Limit != 1 {
		t.Fatalf("core limits %+v", lim)
	}
	if a, b := e.takeTask("b1"), e.takeTask("b2"); a != s1 || b != f1 {
		t.Fatalf("backends took %s and %s", a, b)
	}
	e.finish(f1)
	e.waitFor("next fast task out after a finish", wait, func() bool { return slices.Contains(e.outcoming(), f2) })
	e.checkLimits(1, 1)
	if q := e.queued(); !slices.Equal(q, []string{s2, m1}) {
		t.Fatalf("queue %v", q)
	}
	if _, ok := e.executing()[f1]; ok {
		t.Fatal("the finished task still holds a slot")
	}
}

// A default task starts slow; a slow head blocked by it downgrades it to
// fast ("timeout 3000" on its control list) and starts.
func TestDefaultTaskDowngradedForBlockedSlowHead(t *testing.T) {
	e := newEnv(t)
	e.addBackends(2, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	d := e.submit(0, false)
	e.waitFor("default task out", wait, func() bool { return e.executing()[d] == "30000" })
	s := e.submit(30000, false)
	e.waitFor("slow task out", wait, func() bool { return e.executing()[s] == "30000" })
	if c := e.control(d); !slices.Equal(c, []string{"timeout 3000"}) {
		t.Fatalf("control of the default task %v", c)
	}
	if ex := e.executing()[d]; ex != "3000" {
		t.Fatalf("default task holds %s", ex)
	}
	if to := e.rdb.HGet(e.ctx(), e.keys.Task(d), redisq.FieldTimeout).Val(); to != "3000" {
		t.Fatalf("default task's timeout %s", to)
	}
	if ttl := e.rdb.PTTL(e.ctx(), e.keys.TaskControl(d)).Val(); ttl <= 0 || ttl > redisq.TaskTTL {
		t.Fatalf("control list TTL %v", ttl)
	}
}

// An interactive task starts at once on a free backend and is denied when
// none is free.
func TestQueueServerInteractiveTaskStartsOrIsDenied(t *testing.T) {
	e := newEnv(t)
	e.addBackends(1, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	i1 := e.submit(0, true)
	e.waitFor("interactive task out", wait, func() bool { return e.executing()[i1] == "interactive" })
	if to := e.rdb.HGet(e.ctx(), e.keys.Task(i1), redisq.FieldTimeout).Val(); to != "" {
		t.Fatalf("interactive task got a timeout %q", to)
	}
	i2 := e.submit(0, true)
	e.waitFor("second interactive task denied", wait, func() bool { return len(e.control(i2)) == 1 })
	if c := e.control(i2)[0]; c != "denied "+asyqueue.ErrNoBackend.Error() {
		t.Fatalf("control %q", c)
	}
	if _, ok := e.executing()[i2]; ok || slices.Contains(e.outcoming(), i2) {
		t.Fatal("a denied task holds a slot")
	}
}

// Queued tasks get estimates in float seconds and their position.
func TestQueuedTasksGetEstimates(t *testing.T) {
	e := newEnv(t)
	e.addBackends(1, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	run := e.submit(3000, false)
	e.waitFor("first task out", wait, func() bool { return slices.Contains(e.outcoming(), run) })
	q1, q2 := e.submit(3000, false), e.submit(3000, false)
	for pos, id := range []string{q1, q2} {
		e.waitFor("estimate of "+id, wait, func() bool { return e.rdb.LLen(e.ctx(), e.keys.TaskEstimate(id)).Val() > 0 })
		est := e.rdb.LIndex(e.ctx(), e.keys.TaskEstimate(id), 0).Val()
		w, known, err := redisq.ParseEstimate(est)
		if err != nil || !known || w <= 0 || w > 10*time.Second || !strings.Contains(est, ".") {
			t.Fatalf("estimate of %s: %q (%v, %v, %v)", id, est, w, known, err)
		}
		if p := e.rdb.HGet(e.ctx(), e.keys.Task(id), redisq.FieldPosition).Val(); p != strconv.Itoa(pos) {
			t.Fatalf("position of %s: %q, want %d", id, p, pos)
		}
		if ttl := e.rdb.PTTL(e.ctx(), e.keys.TaskEstimate(id)).Val(); ttl <= 0 {
			t.Fatalf("estimate list has no TTL: %v", ttl)
		}
	}
}

// With no backend at all a queued task is told "inf".
func TestQueuedTaskWithoutBackendsGetsInf(t *testing.T) {
	e := newEnv(t)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	id := e.submit(3000, false)
	e.waitFor("estimate", wait, func() bool { return e.rdb.LLen(e.ctx(), e.keys.TaskEstimate(id)).Val() > 0 })
	if est := e.rdb.LIndex(e.ctx(), e.keys.TaskEstimate(id), 0).Val(); est != "inf" {
		t.Fatalf("estimate %q", est)
	}
	e.addBackends(1, time.Minute)
	e.waitFor("task out once a backend came", wait, func() bool { return slices.Contains(e.outcoming(), id) })
}

// A backend whose heartbeat expired is removed from backend.set and the
// limits shrink to the live count.
func TestBackendWithExpiredHeartbeatRemoved(t *testing.T) {
	e := newEnv(t)
	e.addBackends(3, time.Minute)
	dying := e.addBackends(1, 300*time.Millisecond)[0]
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	e.waitFor("4 slots", wait, func() bool { return e.status(n).Core.Slots == 4 })
	e.waitFor("dead backend removed", wait, func() bool {
		return !e.rdb.SIsMember(e.ctx(), e.keys.BackendSet(), dying).Val()
	})
	e.waitFor("3 slots", wait, func() bool { return e.status(n).Core.Slots == 3 })
	if lim := e.status(n).Core.Tiers; lim[0].Limit != 3 || lim[1].Limit != 2 || lim[2].Limit != 1 {
		t.Fatalf("limits %+v", lim)
	}
	if !e.logs.Contains("heartbeat expired") {
		t.Fatal("no log line for the removed backend")
	}
}

// A taken task whose hash its queue server deleted (and whose backend never
// reported) is swept out of queue.processing; its slot serves the next task.
func TestBackendsTaskWithGoneHashCleanedUp(t *testing.T) {
	e := newEnv(t)
	e.addBackends(1, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	a := e.submit(3000, false)
	b := e.submit(3000, false)
	if got := e.takeTask("b1"); got != a {
		t.Fatalf("took %s", got)
	}
	e.endTask(a)
	e.waitFor("processing swept", wait, func() bool {
		return !e.rdb.SIsMember(e.ctx(), e.keys.Processing(), a).Val()
	})
	e.waitFor("next task out", wait, func() bool { return slices.Contains(e.outcoming(), b) })
	if _, ok := e.executing()[a]; ok {
		t.Fatal("the swept task still holds a slot")
	}
}

// An entry a backend read and never took (it died) is aborted: the queue
// server hears "end Backend went away during the task".
func TestBackendDiedBetweenReadAndTakeAborts(t *testing.T) {
	e := newEnv(t)
	e.addBackends(1, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	id := e.submit(3000, false)
	if got, _ := e.readEntry("dead"); got != id {
		t.Fatalf("read %s", got)
	}
	e.waitFor("end on the control list", wait, func() bool { return len(e.control(id)) == 1 })
	if c := e.control(id)[0]; c != "end "+asyqueue.BackendLostText {
		t.Fatalf("control %q", c)
	}
	if len(e.outcoming()) != 0 || len(e.executing()) != 0 {
		t.Fatalf("outcoming %v executing %v", e.outcoming(), e.executing())
	}
	next := e.submit(3000, false)
	e.waitFor("the slot serves the next task", wait, func() bool { return slices.Contains(e.outcoming(), next) })
}

// A queued task aborted by its queue server (keys deleted, ID pushed to
// queue.finished) leaves the queue at once.
func TestQueueServerAbortsQueuedTask(t *testing.T) {
	e := newEnv(t)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	id := e.submit(3000, false)
	e.waitFor("queued", wait, func() bool { return len(e.queued()) == 1 })
	e.endTask(id)
	e.rdb.RPush(e.ctx(), e.keys.Finished(), id)
	e.waitFor("out of the queue", wait, func() bool { return len(e.queued()) == 0 && e.status(n).Core.Queued == 0 })
}

// Garbage in the lists and a malformed task hash are logged and skipped;
// the scheduler goes on serving.
func TestBadInputIsLoggedAndSkipped(t *testing.T) {
	e := newEnv(t)
	e.addBackends(1, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	e.rdb.RPush(e.ctx(), e.keys.Incoming(), "no-such-task", "")
	e.submitHash("bad", map[string]any{"duration": "soon", "main": "a.asy"})
	e.submitHash("odd", map[string]any{"duration": "4000"})
	e.rdb.RPush(e.ctx(), e.keys.Finished(), "never-seen")
	e.rdb.RPush(e.ctx(), e.keys.BackendUpdated(), "\x00garbage")
	good := e.submit(3000, false)
	e.waitFor("good task out", wait, func() bool { return slices.Contains(e.outcoming(), good) })
	e.waitFor("malformed tasks denied", wait, func() bool { return len(e.control("bad")) == 1 && len(e.control("odd")) == 1 })
	if c := e.control("bad")[0]; c != "denied "+invalidText {
		t.Fatalf("control %q", c)
	}
	for _, line := range []string{`task="\"no-such-task\""`, "malformed task hash", `task="\"never-seen\""`} {
		e.waitFor("log line "+line, wait, func() bool { return e.logs.Contains(line) })
	}
	if q := e.queued(); len(q) != 0 || len(e.executing()) != 1 {
		t.Fatalf("queue %v executing %v", q, e.executing())
	}
	if st := e.status(n); !st.Leading || st.Core.Running != 1 {
		t.Fatalf("status %+v", st)
	}
}

// Foreign values in keys: a task key that is not a hash counts as gone, a
// control list that is not a list is skipped, and a core key of the wrong
// type stops the scheduler's steps with a clear error, losing nothing,
// until it is fixed.
func TestForeignValuesInKeysAreSkipped(t *testing.T) {
	e := newEnv(t)
	e.addBackends(1, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	e.rdb.Set(e.ctx(), e.keys.Task("str"), "junk", 0)
	e.rdb.RPush(e.ctx(), e.keys.Incoming(), "str")
	e.rdb.Set(e.ctx(), e.keys.TaskControl("odd"), "junk", 0)
	e.submitHash("odd", map[string]any{"duration": "4000"})
	first := e.submit(3000, false)
	e.waitFor("first task out", wait, func() bool { return slices.Contains(e.outcoming(), first) })
	e.waitFor("log lines", wait, func() bool { return e.logs.Contains(`task="\"str\""`) && e.logs.Contains(`task="\"odd\""`) })

	e.rdb.Set(e.ctx(), e.keys.Executing(), "junk", 0)
	second := e.submit(3000, false)
	e.waitFor("a clear error", wait, func() bool { return e.logs.Contains("WRONGTYPE foreign value in " + e.keys.Executing()) })
	if got := e.rdb.LRange(e.ctx(), e.keys.Incoming(), 0, -1).Val(); !slices.Equal(got, []string{second}) {
		t.Fatalf("queue.incoming %v", got)
	}
	e.rdb.Del(e.ctx(), e.keys.Executing())
	e.waitFor("second task out once the key is fixed", wait, func() bool { return slices.Contains(e.outcoming(), second) })
	if !e.status(n).Leading {
		t.Fatal("the scheduler stopped leading")
	}
}

// A task whose run the core would retry ends for its queue server with
// "end Backend went away during the task" and leaves the core: when a
// backend comes back it gets the next task, not one nobody waits for. The
// Asymptote queue never retries, so this test gives the leader's queue a
// retry policy: an injected fault, since the real configuration cannot
// produce the event. The embedded dispatcher has the same test
// (asyqueue's TestRetryingTaskEndsAndLeavesTheCore).
func TestRetryingTaskEndsAndLeavesTheCore(t *testing.T) {
	e := newEnv(t)
	gone := e.addBackends(1, time.Minute)
	n := e.startScheduler("a", nil)
	e.waitLeading(n, wait)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := n.s.do(ctx, func(l *leader) {
		if err := l.core.DefineQueue(sched.QueueSpec{Name: asyqueue.QueueName, Retry: sched.RetryPolicy{MaxAttempts: 3}}); err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	first := e.submit(3000, false)
	e.waitFor("the first task out", wait, func() bool { return slices.Contains(e.outcoming(), first) })
	e.removeBackends(gone)
	e.waitFor("end on the control list", wait, func() bool { return len(e.control(first)) == 1 })
	if c := e.control(first)[0]; c != "end "+asyqueue.BackendLostText {
		t.Fatalf("control %q", c)
	}
	e.addBackends(1, time.Minute)
	second := e.submit(3000, false)
	e.waitFor("the next task out", wait, func() bool { return slices.Contains(e.outcoming(), second) })
	if ex := e.executing(); len(ex) != 1 || ex[second] == "" {
		t.Fatalf("queue.executing %v: want only the next task holding a slot", ex)
	}
}
