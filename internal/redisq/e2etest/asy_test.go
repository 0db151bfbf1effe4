package e2etest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asyclient"
	"github.com/usherhq/usher/internal/redisq/redistest"
)

// taskKind is one kind of task of the mixed workload.
type taskKind struct {
	timeout time.Duration // 0: a default task
	format  string
	source  string // %d is the task's number, which keeps the result cache out
}

var mixed = []taskKind{
	{3 * time.Second, "svg", "draw((0,0)--(%d+1,1));\n"},
	{3 * time.Second, "svg", "draw(circle((0,0),%d+1));\n"},
	{0, "svg", "draw((0,0)--(1,%d+1));\n"},
	{0, "svg", "draw(unitsquare); // %d\n"},
	{10 * time.Second, "png", "fill(unitsquare); // %d\n"},
	{30 * time.Second, "pdf", "draw(unitcircle); // %d\n"},
}

// outcome is what one client saw.
type outcome struct {
	n      int
	final  asyclient.Message
	finals int   // complete or denied messages seen
	err    error // the connection failed before a final message
	extra  bool  // a message arrived after the final one
}

// run sends task n of kind k to f and reads until the server closes.
func run(ctx context.Context, f *front, n int, k taskKind) outcome {
	o := outcome{n: n}
	c, err := asyclient.Dial(ctx, f.asyURL())
	if err != nil {
		o.err = err
		return o
	}
	defer c.Close()
	src := []byte(fmt.Sprintf(k.source, n))
	files := []asyclient.File{{Name: "task" + strconv.Itoa(n) + ".asy", Data: src, Main: true}}
	if err := c.Submit(ctx, files, asyclient.Options{Timeout: k.timeout, Format: k.format}); err != nil {
		o.err = err
		return o
	}
	for {
		m, err := c.Next(ctx)
		if err != nil {
			if o.finals == 0 {
				o.err = err
			}
			return o
		}
		if o.finals > 0 {
			o.extra = true
		}
		if m.Final() {
			o.finals++
			o.final = m
		}
	}
}

// workload runs n tasks of the mixed kinds over the queue servers, conc
// at a time, and returns each task's outcome. ended, if not nil, counts
// the tasks that ended.
func workload(ctx context.Context, fronts []*front, n, conc int, ended *atomic.Int64) []outcome {
	out := make([]outcome, n)
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = run(ctx, fronts[i%len(fronts)], i, mixed[i%len(mixed)])
			if ended != nil {
				ended.Add(1)
			}
		}()
	}
	wg.Wait()
	return out
}

// checkExactlyOnce fails the test unless every task got exactly one final
// message and nothing after it; it returns how many succeeded and counts
// the other endings by text.
func checkExactlyOnce(t testing.TB, outs []outcome) (succeeded int, errs map[string]int) {
	t.Helper()
	errs = map[string]int{}
	for _, o := range outs {
		switch {
		case o.err != nil:
			t.Errorf("task %d: connection failed before its end: %v", o.n, o.err)
		case o.finals != 1 || o.extra:
			t.Errorf("task %d: %d final messages (extra after: %v)", o.n, o.finals, o.extra)
		case o.final.Verb == "complete" && o.final.Success:
			succeeded++
		default:
			errs[o.final.Verb+": "+o.final.Error]++
			if !strings.HasPrefix(o.final.Verb+": "+o.final.Error, timeLimitText) {
				k := mixed[o.n%len(mixed)]
				t.Logf("task %d (%v %s %q): %s %q", o.n, k.timeout, k.format, fmt.Sprintf(k.source, o.n), o.final.Verb, o.final.Error)
			}
		}
	}
	return succeeded, errs
}

// timeLimitText starts the protocol's text for a task stopped by its tier's
// limit: on a loaded machine a fast or downgraded task may reach it.
const timeLimitText = "complete: Execution aborted due to the time limit"

// checkEndings fails the test unless nearly every task (nine in ten)
// succeeded and the others were stopped by their tier's time limit,
// nothing else.
func checkEndings(t testing.TB, ok, n int, errs map[string]int) {
	t.Helper()
	checkEndingsAtLeast(t, ok, n, n*9/10, errs)
}

// checkEndingsAtLeast is checkEndings with its own least number of
// successes: a handful of 3 s tasks on a loaded machine may all reach the
// fast tier's limit, which says nothing about the rule a test checks.
func checkEndingsAtLeast(t testing.TB, ok, n, least int, errs map[string]int) {
	t.Helper()
	for text, count := range errs {
		if !strings.HasPrefix(text, timeLimitText) {
			t.Errorf("%d tasks ended with %q", count, text)
		}
	}
	if ok < least {
		t.Errorf("only %d of %d tasks succeeded; the others: %v", ok, n, errs)
	}
}

// tierLimits are the most tasks running at once: all, medium or slower,
// slow.
type tierLimits struct{ all, medium, slow int }

// defaultLimits are the tiers' default shares for n backends:
// medium-or-slower ≤ ⌈n/2⌉, slow ≤ ⌈n/4⌉.
func defaultLimits(n int) tierLimits { return tierLimits{n, (n + 1) / 2, (n + 3) / 4} }

// tierWatch samples queue.executing until stopped and records every
// sample that breaks the limits.
type tierWatch struct {
	stop     chan struct{}
	done     chan struct{}
	samples  int
	breaches []string
}

func (d *deployment) watchTiers(l tierLimits) *tierWatch {
	w := &tierWatch{stop: make(chan struct{}), done: make(chan struct{})}
	backends, medium, slow := l.all, l.medium, l.slow
	go func() {
		defer close(w.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			vals, err := d.rdb.HVals(context.Background(), d.keys.Executing()).Result()
			if err != nil {
				continue
			}
			w.samples++
			var all, med, sl int
			for _, v := range vals {
				all++
				ms, _ := strconv.Atoi(v)
				if ms >= 10000 {
					med++
				}
				if ms >= 30000 {
					sl++
				}
			}
			if all > backends || med > medium || sl > slow {
				w.breaches = append(w.breaches, fmt.Sprintf("running %d (≤ %d), medium+slow %d (≤ %d), slow %d (≤ %d): %v",
					all, backends, med, medium, sl, slow, vals))
			}
		}
	}()
	return w
}

func (w *tierWatch) end() { close(w.stop); <-w.done }

func TestAsyAcrossTwoQueueServersTwoSchedulersThreeBackends(t *testing.T) {
	d := newSingleRedis(t)
	d.startScheduler("sched-1")
	d.startScheduler("sched-2")
	d.startBackends(backendNames(3))
	fronts := []*front{d.startFront("front-1"), d.startFront("front-2")}
	d.waitLeader(10*time.Second, "")
	d.waitBackends(3)

	// 90 tasks, 40 at a time: every tier is full most of the run (the
	// slow tier's one slot runs its 15 pdf tasks one after another).
	samples := d.workloadWithinLimits(fronts, defaultLimits(3), 90, 40, 8*time.Minute)
	t.Logf("90 tasks; %d samples of queue.executing within the limits", samples)
}

// workloadWithinLimits runs n mixed tasks, conc at a time, over the queue
// servers while checking the tier limits from queue.executing; every task must end exactly once, nearly all
// succeed, and nothing of them stay in Redis. It returns the samples.
func (d *deployment) workloadWithinLimits(fronts []*front, limits tierLimits, n, conc int, bound time.Duration) int {
	t := d.t
	t.Helper()
	watch := d.watchTiers(limits)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	outs := workload(ctx, fronts, n, conc, nil)
	watch.end()
	ok, errs := checkExactlyOnce(t, outs)
	// Three backends on two cores beside the other packages' tests (the
	// sandbox's 3D renders among them): more than half of the 3 s tasks
	// may reach their time limit (49 of 90 in one clean-clone run), which
	// says nothing of the rules checked here (each task ends once, the
	// tiers' limits hold), so a third must succeed; any other ending
	// still fails.
	checkEndingsAtLeast(t, ok, len(outs), len(outs)/3, errs)
	if len(watch.breaches) > 0 {
		t.Errorf("tier limits broken in %d of %d samples of queue.executing, e.g. %s", len(watch.breaches), watch.samples, watch.breaches[0])
	}
	d.eventually(10*time.Second, "nothing of the tasks left in Redis", func() (bool, string) {
		left := d.leftovers()
		return len(left) == 0, fmt.Sprint(left)
	})
	return watch.samples
}

func TestAsyOnRedisCluster(t *testing.T) {
	d := newDeployment(t, redistest.StartCluster(t, 3).URL())
	fronts := d.startTwoOfEach()

	d.workloadWithinLimits(fronts, defaultLimits(2), 42, 20, 4*time.Minute)
}
