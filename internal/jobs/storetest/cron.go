package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/testclock"
	"github.com/usherhq/usher/jobtype"
)

// cronJSON is the records as JSON, to compare them whole.
func cronJSON(t *testing.T, recs []jobs.CronRecord) string {
	t.Helper()
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Periodic jobs' entries are written, changed and removed; a fire writes
// the tick's job and the entry's lastAt together; Load reads them back,
// sorted by name, also from a store opened anew.
func testCronEntries(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	hourly := jobs.CronRecord{Name: "hourly", Spec: "0 * * * *", Timezone: "UTC", From: t0,
		Job: jobtype.JobSpec{Queue: "q", Priority: 3, Payload: json.RawMessage(`{"report":"sales"}`), Keys: []string{"db"}}}
	paris := jobs.CronRecord{Name: "daily-paris", Spec: "30 6 * * *", Timezone: "Europe/Paris", Paused: true, From: t0,
		Job: jobtype.JobSpec{Queue: "q"}}
	fired := hourly
	fired.LastAt = t0.Add(time.Hour)
	tickJob := Insert(1)
	Apply(t, s,
		jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "q", Active: true}},
		jobs.Op{Kind: jobs.OpPutCron, Cron: &hourly},
		jobs.Op{Kind: jobs.OpPutCron, Cron: &paris},
		jobs.Op{Kind: jobs.OpFireCron, Record: tickJob.Record, Cron: &fired},
	)
	want := cronJSON(t, []jobs.CronRecord{paris, fired})
	snap := load(t, s)
	if got := cronJSON(t, snap.Crons); got != want {
		t.Fatalf("periodic jobs loaded:\n got %s\nwant %s", got, want)
	}
	if len(snap.Jobs) != 1 || snap.Jobs[0].ID != 1 || snap.NextJob != 2 {
		t.Fatalf("the fire's job: jobs %+v next %d; want job 1, next 2", snap.Jobs, snap.NextJob)
	}
	if j := job(t, s, 1); string(j.Payload) != `{"n":1}` || j.State != jobtype.StateQueued {
		t.Fatalf("the fire's job reads %+v", j)
	}
	Apply(t, s, jobs.Op{Kind: jobs.OpDeleteCron, Name: "daily-paris"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	if got, want := cronJSON(t, load(t, s).Crons), cronJSON(t, []jobs.CronRecord{fired}); got != want {
		t.Fatalf("after a removal and a reopen:\n got %s\nwant %s", got, want)
	}
}

// cronEngine opens the real engine on s with clock.
func cronEngine(t *testing.T, s jobs.Store, clock *testclock.Clock) *jobs.Engine {
	t.Helper()
	e, err := jobs.Open(context.Background(), jobs.Config{Store: s, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// tick applies the clock's time and fails the test on a store error.
func tick(t *testing.T, e *jobs.Engine) {
	t.Helper()
	if err := e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// cronJobs lists the jobs' queue and payload.
func cronJobs(t *testing.T, e *jobs.Engine) []string {
	t.Helper()
	list, err := e.Jobs(context.Background(), jobs.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, j := range list {
		out = append(out, j.ID+":"+j.Queue+":"+string(j.Payload))
	}
	return out
}

// wantCron checks an entry's lastAt and nextAt (zero: absent).
func wantCron(t *testing.T, e *jobs.Engine, name string, last, next time.Time) {
	t.Helper()
	c, err := e.Cron(name)
	if err != nil {
		t.Fatal(err)
	}
	same := func(p *time.Time, w time.Time) bool { return (p == nil && w.IsZero()) || (p != nil && p.Equal(w)) }
	if !same(c.LastAt, last) || !same(c.NextAt, next) {
		t.Fatalf("%s: lastAt %v nextAt %v; want %v and %v", name, c.LastAt, c.NextAt, last, next)
	}
}

// The engine on the store makes one job per tick of a periodic job, at
// the tick and not before; through a restart between ticks it makes no
// tick's job twice; after an outage that missed several ticks it makes
// one job, for the latest of them; paused, it makes none, and resumed it
// skips the ticks of the pause; removed, it makes none.
func testCronEngine(t *testing.T, open func(t *testing.T) jobs.Store) {
	ctx := context.Background()
	at := func(h, m int) time.Time { return time.Date(2026, 1, 5, h, m, 0, 0, time.UTC) }
	clock := testclock.New(at(9, 59).Add(30 * time.Second))
	s := open(t)
	e := cronEngine(t, s, clock)
	if _, err := e.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true}); err != nil {
		t.Fatal(err)
	}
	c, err := e.CreateCron(ctx, jobtype.CronSpec{Name: "hourly", Spec: "0 * * * *", Queue: "q",
		Job: jobtype.JobSpec{Payload: json.RawMessage(`{"r":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Timezone != "UTC" || c.Job.Queue != "q" || c.Paused {
		t.Fatalf("created %+v", c)
	}
	wantCron(t, e, "hourly", time.Time{}, at(10, 0))
	step := func(d time.Duration, want int) {
		t.Helper()
		clock.Advance(d)
		tick(t, e)
		if got := cronJobs(t, e); len(got) != want {
			t.Fatalf("at %v: jobs %v; want %d", clock.Now(), got, want)
		}
	}
	step(0, 0)              // 09:59:30: before the tick
	step(30*time.Second, 1) // 10:00: the tick
	step(0, 1)              // the same time again: nothing more
	step(10*time.Minute, 1) // 10:10: between ticks
	if got := cronJobs(t, e); got[0] != "1:q:{\"r\":1}" {
		t.Fatalf("the tick's job is %v; want the template's queue and payload", got)
	}
	wantCron(t, e, "hourly", at(10, 0), at(11, 0))

	// A restart between ticks: the new engine knows 10:00 made its job.
	e.Drain()
	s.Close()
	s = open(t)
	e = cronEngine(t, s, clock)
	wantCron(t, e, "hourly", at(10, 0), at(11, 0))
	step(0, 1)
	step(50*time.Minute, 2) // 11:00

	// An outage over 12:00, 13:00 and 14:00: one job, for 14:00.
	e.Drain()
	s.Close()
	clock.Advance(3*time.Hour + 30*time.Minute) // 14:30
	s = open(t)
	e = cronEngine(t, s, clock)
	wantCron(t, e, "hourly", at(11, 0), at(12, 0))
	step(0, 3)
	wantCron(t, e, "hourly", at(14, 0), at(15, 0))
	step(0, 3)

	// Paused over 15:00 and 16:00 (through a restart), resumed at 16:30:
	// the next job is 17:00's.
	if _, err := e.UpdateCron(ctx, "hourly", jobtype.CronUpdate{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	wantCron(t, e, "hourly", at(14, 0), time.Time{})
	step(2*time.Hour, 3) // 16:30
	e.Drain()
	s.Close()
	s = open(t)
	e = cronEngine(t, s, clock)
	step(0, 3)
	if _, err := e.UpdateCron(ctx, "hourly", jobtype.CronUpdate{Paused: new(false)}); err != nil {
		t.Fatal(err)
	}
	wantCron(t, e, "hourly", at(14, 0), at(17, 0))
	step(0, 3)
	step(30*time.Minute, 4) // 17:00

	// Removed: no more jobs, also after a restart; its jobs stay.
	if err := e.DeleteCron(ctx, "hourly"); err != nil {
		t.Fatal(err)
	}
	step(time.Hour, 4)
	e.Drain()
	s.Close()
	s = open(t)
	e = cronEngine(t, s, clock)
	step(time.Hour, 4)
	if got := e.Crons(); len(got) != 0 {
		t.Fatalf("after removal: %+v", got)
	}
}
