package e2etest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq/redistest"
)

// sleepy keeps asy busy for two seconds before it draws, whatever the
// machine's load.
const sleepy = "usleep(2000000); // %d\ndraw((0,0)--(1,1));\n"

// outage is how long Redis stays down: longer than the scheduler's lease
// and the backends' release retries were before.
const outage = 6 * time.Second

func TestRedisKilledAndRestartedUnderClients(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "everysec")
	d := newDeployment(t, srv.URL())
	d.startScheduler("sched-1", "--medium-limit", "2")
	d.startBackends(backendNames(2))
	f := d.startFront("front-1")
	d.waitLeader(10*time.Second, "")
	d.waitBackends(2)
	defer d.logsOnFailure()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Eight clients: two running, six waiting when Redis dies; the running
	// ones end while it is down.
	const n = 8
	outs := make([]outcome, n)
	ended := make([]time.Time, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = run(ctx, f, i, taskKind{timeout: 10 * time.Second, format: "svg", source: sleepy})
			ended[i] = time.Now()
		}()
	}
	d.eventually(30*time.Second, "two running and six waiting", func() (bool, string) {
		q := d.rdb.ZCard(ctx, d.keys.Queue()).Val()
		r := d.rdb.SCard(ctx, d.keys.Processing()).Val()
		return q == n-2 && r == 2, fmt.Sprintf("%d queued, %d running", q, r)
	})
	srv.Kill()
	time.Sleep(outage) // the fault itself, not a wait for something to happen
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	wg.Wait()

	// Every client hears exactly one end, and the waiting ones carry on:
	// six tasks of two seconds on two backends end well within the bound.
	ok, errs := checkExactlyOnce(t, outs)
	// A task a backend was taking when Redis died may end, but only with a
	// text that names the fault; any other text fails below. (The keys
	// of errs are "verb: text".)
	faults := 0
	for ending, count := range errs {
		if _, text, _ := strings.Cut(ending, ": "); asyqueue.ServerFault(text) {
			delete(errs, ending)
			faults += count
		}
	}
	if faults > 2 {
		t.Errorf("%d tasks ended with the fault; only the two running when Redis died may", faults)
	}
	checkEndingsAtLeast(t, ok, n, (n-faults)*9/10, errs) // the waiting ones carry on
	t.Logf("%d of %d tasks succeeded, %d ended with the fault", ok, n, faults)
	const bound = 30 * time.Second
	for i, at := range ended {
		if at.Sub(back) > bound {
			t.Errorf("task %d ended %v after Redis was back, want within %v", i, at.Sub(back).Round(time.Millisecond), bound)
		}
	}
	if o := run(ctx, f, n, mixed[0]); !o.final.Success {
		t.Errorf("a new task after the restart: %s %q (%v)", o.final.Verb, o.final.Error, o.err)
	}
	d.eventually(20*time.Second, "nothing of the tasks left in Redis", func() (bool, string) {
		left := d.leftovers()
		return len(left) == 0, fmt.Sprint(left)
	})
}

// logsOnFailure logs the tail of every process's log if the test failed.
func (d *deployment) logsOnFailure() {
	if !d.t.Failed() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, p := range d.scheds {
		d.t.Logf("%s:\n%s", name, p.Tail(60))
	}
	for name, p := range d.fronts {
		d.t.Logf("%s:\n%s", name, p.Tail(60))
	}
	for id, p := range d.backends {
		d.t.Logf("backend %s:\n%s", id, p.Tail(30))
	}
}
