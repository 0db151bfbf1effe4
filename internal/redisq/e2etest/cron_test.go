package e2etest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
)

// A periodic job makes one job per tick across the kill -9 of the leading
// scheduler right after a tick (docs/design.md, "Periodic jobs"): no tick
// makes two jobs, the ticks missed while no scheduler led make one job
// between them, and the new leader ticks on.
//
// A job's tick is read from its createdAt: an engine fires, at its now,
// the latest tick at or before now and creates the job just after, so
// with "@every 1s" (ticks on whole seconds) the tick is createdAt
// truncated to the second, however late the engine woke. Two jobs for one
// tick, or several made at once to catch up missed ticks, show as two
// jobs on one second.
func TestCronLeaderKilledAtTick(t *testing.T) {
	t.Parallel()
	d := newSingleRedis(t) // builds the binary once for the package
	start := time.Now()
	d.startScheduler("sched-1")
	first := d.waitLeader(10*time.Second, "")
	d.startScheduler("sched-2")
	f := d.startFront("front-1")
	defer d.logsOnFailure()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(f.base, adminToken)
	const queue, name = "ticks", "every-second"
	d.eventually(10*time.Second, "the queue created through the queue server", func() (bool, string) {
		_, err := c.CreateQueue(ctx, client.QueueSpec{Name: queue})
		return err == nil || client.StatusOf(err) == http.StatusConflict, fmt.Sprint(err)
	})
	if _, err := c.CreateCron(ctx, client.CronSpec{Name: name, Spec: "@every 1s", Queue: queue}); err != nil {
		t.Fatal(err)
	}
	list := func() ([]client.Job, error) {
		var out []client.Job
		for j, err := range c.AllJobs(ctx, client.JobFilter{Queue: queue, Limit: 1000}) {
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
		return out, nil
	}

	// The leader's third tick: kill it as soon as its job is listed.
	var before []client.Job
	d.eventually(15*time.Second, "three ticks' jobs", func() (bool, string) {
		var err error
		before, err = list()
		return err == nil && len(before) >= 3, fmt.Sprintf("%d jobs, %v", len(before), err)
	})
	d.schedulerProc(first).Kill()
	killed := time.Now() // every job of the killed leader was made before
	second := d.waitLeader(10*time.Second, first)

	// The new leader catches up and ticks on.
	var jobs []client.Job
	d.eventually(20*time.Second, "three jobs made by the new leader", func() (bool, string) {
		var err error
		jobs, err = list()
		return err == nil && len(madeAfter(jobs, killed)) >= 3, fmt.Sprintf("%d jobs, %v", len(jobs), err)
	})
	if _, err := c.PauseCron(ctx, name); err != nil {
		t.Fatal(err)
	}
	jobs, err := list() // final: a paused entry makes no job
	if err != nil {
		t.Fatal(err)
	}
	entry, err := c.Cron(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s killed at %s after %d jobs; %s led; ticks: %s", first, killed.UTC().Format("15:04:05.000"),
		len(before), second, tickLog(jobs))

	checkOneJobPerTick(t, jobs)
	for i, j := range before {
		if i >= len(jobs) || jobs[i].ID != j.ID {
			t.Fatalf("job %s, listed before the kill, is gone after it", j.ID)
		}
	}
	old, fresh := len(jobs)-len(madeAfter(jobs, killed)), madeAfter(jobs, killed)
	lastOld, catchUp := tickOf(jobs[old-1]), tickOf(fresh[0])
	// The standby leads once the lease (3 s) has lapsed: the outage spans
	// at least one tick, which is skipped; the catch-up job, the one job
	// made for the missed ticks, is for the latest of them.
	if skipped := catchUp.Sub(lastOld)/time.Second - 1; skipped < 1 {
		t.Fatalf("the new leader's first tick %s follows the killed leader's last %s: no tick was missed",
			catchUp.Format("15:04:05"), lastOld.Format("15:04:05"))
	}
	last := tickOf(jobs[len(jobs)-1])
	if entry.LastAt == nil || !entry.LastAt.Equal(last) || !entry.Paused || entry.NextAt != nil {
		t.Fatalf("the paused entry: lastAt %v, paused %v, nextAt %v; want lastAt %s (its last job's tick), paused, no nextAt",
			entry.LastAt, entry.Paused, entry.NextAt, last.Format(time.RFC3339))
	}
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

// tickOf is the tick of an "@every 1s" entry's job: its createdAt
// truncated to the second.
func tickOf(j client.Job) time.Time { return j.CreatedAt.UTC().Truncate(time.Second) }

// madeAfter lists the jobs created after t.
func madeAfter(jobs []client.Job, t time.Time) []client.Job {
	var out []client.Job
	for _, j := range jobs {
		if j.CreatedAt.After(t) {
			out = append(out, j)
		}
	}
	return out
}

// checkOneJobPerTick fails the test unless the jobs, in id order, are for
// ticks strictly later each than the one before.
func checkOneJobPerTick(t *testing.T, jobs []client.Job) {
	t.Helper()
	for i := 1; i < len(jobs); i++ {
		a, b := jobs[i-1], jobs[i]
		if !tickOf(b).After(tickOf(a)) {
			t.Fatalf("jobs %s (made %s) and %s (made %s) are both for tick %s or out of order: a tick made two jobs, or missed ticks made more than one",
				a.ID, a.CreatedAt.Format("15:04:05.000"), b.ID, b.CreatedAt.Format("15:04:05.000"), tickOf(a).Format("15:04:05"))
		}
	}
}

// tickLog shows the jobs' ticks, e.g. "05 06 07 | 11 12 13" with a bar
// where the ticks skip.
func tickLog(jobs []client.Job) string {
	var b strings.Builder
	for i, j := range jobs {
		if i > 0 {
			if tickOf(j).Sub(tickOf(jobs[i-1])) > time.Second {
				b.WriteString(" |")
			}
			b.WriteString(" ")
		}
		b.WriteString(tickOf(j).Format("05"))
	}
	return b.String()
}
