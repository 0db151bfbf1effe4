package scheduler

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/redisq/redistest"
)

// leaseWatch reads scheduler.leader over and over until stop, which
// returns every value other than want it saw ("" for none), in order.
func (e *env) leaseWatch(want string) (stop func() []string) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var others []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			v, err := e.rdb.Get(ctx, e.keys.Leader()).Result()
			if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "nil") {
				continue // a read that timed out in a stall says nothing
			}
			if v != want && ctx.Err() == nil {
				mu.Lock()
				if len(others) == 0 || others[len(others)-1] != v {
					others = append(others, v)
				}
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() []string { cancel(); <-done; return others }
}

// A leader keeps the lead while Redis stalls, each stall shorter than the
// lease, even when the stalls come back to back for longer than the lease
// (a bulk write while Redis rewrites its append-only file): its renewals
// do not wait behind its other steps, which wait on Redis too. The standby
// never leads, the lease never lapses, and the leader's writes go on after.
func TestLeaderKeepsTheLeadThroughRedisStalls(t *testing.T) {
	for _, tc := range []struct {
		name         string
		stall, total time.Duration
	}{
		{"one stall of 2 s", 2 * time.Second, 0},
		{"stalls of 1 s back to back for 6 s", time.Second, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t, redistest.DebugArgs...)
			e := envOn(t, srv.URL())
			e.addBackends(1, time.Minute)
			lead, standby := e.leaderOf(e.startScheduler("a", nil), e.startScheduler("b", nil))
			token := e.status(lead).Token
			running, queued := e.submit(3000, false), e.submit(3000, false)
			e.waitFor("one task out, one queued", wait, func() bool {
				return slices.Equal(e.outcoming(), []string{running}) && slices.Equal(e.queued(), []string{queued})
			})
			e.takeTask("b1")

			stop := e.leaseWatch(token)
			if err := srv.Stall(t.Context(), tc.stall, tc.total); err != nil {
				t.Fatal(err)
			}
			if others := stop(); len(others) > 0 {
				t.Fatalf("scheduler.leader held %q during the stalls, not only %q\nscheduler log:\n%s", others, token, e.logs)
			}
			if st := e.status(lead); !st.Leading || st.Token != token || e.status(standby).Leading {
				t.Fatalf("after the stalls: leader leads %v with %q, standby leads %v; want %q\nscheduler log:\n%s",
					st.Leading, st.Token, e.status(standby).Leading, token, e.logs)
			}
			if e.logs.Contains("stepped down") {
				t.Fatalf("a leader stepped down:\n%s", e.logs)
			}
			e.finish(running)
			e.waitFor("the leader starts the queued task after the stalls", wait, func() bool {
				return slices.Equal(e.outcoming(), []string{queued})
			})
		})
	}
}

// A stall longer than the lease ends the leadership: the term ends by the
// leader's own clock when the lease lapses, while Redis still stalls (the
// generic jobs' /v1, which runs in the term, stops serving then), and a
// term of a higher epoch leads after the stall, with the same tasks: none
// lost, none sent out twice.
func TestRedisStallLongerThanTheLeaseHandsOver(t *testing.T) {
	srv := redistest.Start(t, redistest.DebugArgs...)
	e := envOn(t, srv.URL())
	e.addBackends(1, time.Minute)
	ended := make(chan string, 10)
	onTerm := func(c *Config) {
		c.WhileLeading = func(ctx context.Context, token string) { <-ctx.Done(); ended <- token }
	}
	a, b := e.startScheduler("a", onTerm), e.startScheduler("b", onTerm)
	lead, _ := e.leaderOf(a, b)
	before := e.status(lead).Token
	running, queued := e.submit(3000, false), e.submit(30000, false)
	e.waitFor("one task out, one queued", wait, func() bool {
		return slices.Equal(e.outcoming(), []string{running}) && slices.Equal(e.queued(), []string{queued})
	})
	e.takeTask("b1")
	execBefore := e.executing()

	stalled := make(chan error, 1)
	go func() { stalled <- srv.Stall(context.Background(), 5*time.Second, 0) }()
	select {
	case tok := <-ended:
		if tok != before {
			t.Fatalf("term %s ended, want %s", tok, before)
		}
	case err := <-stalled:
		t.Fatalf("the stall ended (%v) before the term did\nscheduler log:\n%s", err, e.logs)
	}
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
	var now *node
	e.waitFor("a new term leads", takeover, func() bool {
		for _, n := range []*node{a, b} {
			if st := e.status(n); st.Leading && epoch(t, st.Token) > epoch(t, before) {
				now = n
				return true
			}
		}
		return false
	})
	if !e.logs.Contains(`reason="lost the lease: it lapsed`) {
		t.Fatalf("the old leader did not step down for a lapsed lease:\n%s", e.logs)
	}
	if !slices.Equal(e.queued(), []string{queued}) || !maps.Equal(e.executing(), execBefore) || len(e.outcoming()) != 0 {
		t.Fatalf("after the takeover: queue %v, executing %v (before %v), outcoming %v", e.queued(), e.executing(), execBefore, e.outcoming())
	}
	e.finish(running)
	e.waitFor("the new term starts the queued task once", wait, func() bool { return slices.Equal(e.outcoming(), []string{queued}) })
	if st := e.status(now); len(st.Queued) != 0 || st.Running[queued] != "slow" {
		t.Fatalf("new leader's state: %+v", st)
	}
}
