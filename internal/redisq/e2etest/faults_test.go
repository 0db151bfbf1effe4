package e2etest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asyclient"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/testbin"
)

// spin runs until its time limit stops it.
const spin = "while (true) {}\n"

func TestLeadingSchedulerKilledMidRun(t *testing.T) {
	d := newSingleRedis(t)
	d.startScheduler("sched-1")
	first := d.waitLeader(10*time.Second, "")
	d.startScheduler("sched-2")
	d.startBackends(backendNames(3))
	fronts := []*front{d.startFront("front-1"), d.startFront("front-2")}
	d.waitBackends(3)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var ended atomic.Int64
	done := make(chan []outcome, 1)
	go func() { done <- workload(ctx, fronts, 42, 30, &ended) }()
	d.eventually(2*time.Minute, "a third of the tasks ended", func() (bool, string) {
		return ended.Load() >= 14, fmt.Sprintf("%d ended", ended.Load())
	})
	d.schedulerProc(first).Kill()
	killed := time.Now()
	second := d.waitLeader(10*time.Second, first)
	took := time.Since(killed)
	if took > 5*time.Second {
		t.Errorf("the standby led %v after the leader's kill -9, want within 5 s", took)
	}
	outs := <-done
	ok, errs := checkExactlyOnce(t, outs)
	checkEndings(t, ok, len(outs), errs)
	d.eventually(10*time.Second, "nothing of the tasks left in Redis", func() (bool, string) {
		left := d.leftovers()
		return len(left) == 0, fmt.Sprint(left)
	})
	t.Logf("%s killed with 14 of %d tasks ended; %s led %v later", first, len(outs), second, took.Round(time.Millisecond))
}

func (d *deployment) schedulerProc(node string) *testbin.Proc {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.scheds[node]
	if p == nil {
		d.t.Fatalf("no scheduler %q", node)
	}
	return p
}

// backendRunning returns the backend process that took a task, and the
// task's ID.
func (d *deployment) backendRunning(t *testing.T) (*testbin.Proc, string) {
	t.Helper()
	ctx := context.Background()
	var ids []string
	d.eventually(30*time.Second, "a task is in queue.processing", func() (bool, string) {
		ids = d.rdb.SMembers(ctx, d.keys.Processing()).Val()
		return len(ids) > 0, ""
	})
	bid := d.rdb.HGet(ctx, d.keys.Task(ids[0]), redisq.FieldBackend).Val()
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.backends[bid]
	if p == nil {
		t.Fatalf("task %s runs on backend %q, which this test did not start", ids[0], bid)
	}
	return p, ids[0]
}

func TestBackendKilledMidTask(t *testing.T) {
	d := newSingleRedis(t)
	d.startScheduler("sched-1", "--medium-limit", "3", "--slow-limit", "3")
	d.startBackends(backendNames(3), "--heartbeat-ttl", "2s")
	f := d.startFront("front-1")
	d.waitLeader(10*time.Second, "")
	d.waitBackends(3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// One task spins on a backend; two others run beside it.
	victim, err := asyclient.Dial(ctx, f.asyURL())
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	if err := victim.Submit(ctx, []asyclient.File{{Name: "spin.asy", Data: []byte(spin), Main: true}},
		asyclient.Options{Timeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	proc, _ := d.backendRunning(t)
	others := make(chan []outcome, 1)
	go func() { others <- workload(ctx, []*front{f}, 6, 2, nil) }()

	proc.Kill()
	final := readFinal(ctx, t, victim)
	if final.Verb != "complete" || final.Success || final.Error != "Backend went away during the task" {
		t.Fatalf("the task of the killed backend ended with %s %q, want complete: Backend went away during the task", final.Verb, final.Error)
	}
	d.waitBackends(2) // the heartbeat expired: the limits shrink by one slot
	outs := <-others
	ok, errs := checkExactlyOnce(t, outs)
	// The other tasks go on: none ends with the killed backend's error;
	// with six, a loaded machine may stop a few at the fast tier's limit.
	checkEndingsAtLeast(t, ok, len(outs), len(outs)/2, errs)

	d.startBackend("backend-4", "--heartbeat-ttl", "2s")
	d.waitBackends(3)
	d.workloadWithinLimits([]*front{f}, tierLimits{3, 3, 3}, 9, 3, 2*time.Minute)
}

// readFinal reads until the task's final message.
func readFinal(ctx context.Context, t *testing.T, c *asyclient.Conn) asyclient.Message {
	t.Helper()
	for {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("reading until the end: %v", err)
		}
		if m.Final() {
			return m
		}
	}
}

// readUntil reads until a message satisfies ok.
func readUntil(ctx context.Context, t *testing.T, c *asyclient.Conn, what string, ok func(asyclient.Message) bool) {
	t.Helper()
	for {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok(m) {
			return
		}
		if m.Final() {
			t.Fatalf("waiting for %s: the task ended: %s %q", what, m.Verb, m.Error)
		}
	}
}

func TestClientLeavesWhileQueuedAndWhileRunning(t *testing.T) {
	t.Parallel()
	d := newSingleRedis(t)
	d.startScheduler("sched-1")
	d.startBackend("backend-1")
	f := d.startFront("front-1")
	d.waitLeader(10*time.Second, "")
	d.waitBackends(1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	submit := func(name, src string, timeout time.Duration) *asyclient.Conn {
		c, err := asyclient.Dial(ctx, f.asyURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if err := c.Submit(ctx, []asyclient.File{{Name: name, Data: []byte(src), Main: true}}, asyclient.Options{Timeout: timeout}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	running := func(m asyclient.Message) bool { return m.Verb == "queue" && m.Passed }
	queued := func(m asyclient.Message) bool { return m.Verb == "queue" && !m.Passed }

	// A spins on the only backend; B waits behind it and leaves.
	a := submit("a.asy", spin, 30*time.Second)
	readUntil(ctx, t, a, "A running", running)
	b := submit("b.asy", "draw((0,0)--(1,1));\n", 3*time.Second)
	readUntil(ctx, t, b, "B queued", queued)
	b.Close()
	aID := d.rdb.SMembers(ctx, d.keys.Processing()).Val()
	if len(aID) != 1 {
		t.Fatalf("queue.processing = %v, want A alone", aID)
	}
	d.eventually(10*time.Second, "B's keys gone and B out of the queue", func() (bool, string) {
		keys := d.taskKeys()
		for _, k := range keys {
			if k != d.keys.Task(aID[0]) && !strings.HasPrefix(k, d.keys.Task(aID[0])+":") {
				return false, fmt.Sprint(keys)
			}
		}
		return d.rdb.ZCard(ctx, d.keys.Queue()).Val() == 0, "B still in the queue"
	})

	// A leaves while running: its run is aborted and the backend is free
	// for C at once, long before A's 30 s limit. C gets the medium tier's
	// 10 s, so that a loaded machine (CI runs every package at once on two
	// cores) cannot stop a one-line figure at the fast tier's 3 s.
	a.Close()
	start := time.Now()
	c := submit("c.asy", "draw((0,0)--(2,1));\n", 10*time.Second)
	if final := readFinal(ctx, t, c); !final.Success {
		t.Fatalf("C after A left: %s %q", final.Verb, final.Error)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("C took %v: A's run was not aborted when its client left", took)
	}
	d.eventually(10*time.Second, "nothing of the tasks left in Redis", func() (bool, string) {
		left := d.leftovers()
		return len(left) == 0, fmt.Sprint(left)
	})
}
