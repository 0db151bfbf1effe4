package frontend

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testwait"
)

// A waiting task whose Redis restarts either carries on (Redis kept it) or
// ends at once with TaskLostText (Redis lost it), never waits in silence.
func TestWaitingTaskAcrossARedisRestart(t *testing.T) {
	aof := []string{"--appendonly", "yes", "--appendfsync", "always"}
	cases := []struct {
		name  string
		args  []string
		stage func(rdb redis.UniversalClient, k redisq.Keys, id string) // what the scheduler and a backend did
		lost  bool
	}{
		{"restarted empty", nil, func(redis.UniversalClient, redisq.Keys, string) {}, true},
		{"restarted from its file, task queued", aof, func(rdb redis.UniversalClient, k redisq.Keys, id string) {
			rdb.LRem(t.Context(), k.Incoming(), 0, id)
			rdb.ZAdd(t.Context(), k.Queue(), redis.Z{Score: 1, Member: id})
		}, false},
		{"restarted from its file, task still incoming", aof, func(redis.UniversalClient, redisq.Keys, string) {}, false},
		{"backend took it, its address nowhere", aof, func(rdb redis.UniversalClient, k redisq.Keys, id string) {
			rdb.LRem(t.Context(), k.Incoming(), 0, id)
			rdb.HSet(t.Context(), k.Executing(), id, "10000")
			rdb.HSet(t.Context(), k.Task(id), redisq.FieldBackend, "1")
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t, c.args...)
			q, rdb := newQueue(t, srv.URL(), Config{})
			k := q.cfg.Keys
			tk, err := q.Submit("a", svgTask(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			c.stage(rdb, k, tk.ID())
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			if !c.lost {
				// Kept: the scheduler's next estimate reaches the session.
				testwait.Eventually(t, 10*time.Second, func() bool {
					return rdb.RPush(t.Context(), k.TaskEstimate(tk.ID()), "2.5").Err() == nil
				}, "redis answers again")
				if u := next(t, tk); u.End != "" || u.Estimate == nil {
					t.Fatalf("after the restart: %+v, want the estimate", u)
				}
				return
			}
			if u := next(t, tk); u.End != asyqueue.TaskLostText {
				t.Fatalf("after the restart: %+v, want the end %q", u, asyqueue.TaskLostText)
			}
		})
	}
}

// A backend's address read by a connection that Redis's restart cut off is
// found again in the task hash: the task starts instead of waiting.
func TestAddressLostWithARestartIsRecovered(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	q, rdb := newQueue(t, srv.URL(), Config{})
	k := q.cfg.Keys
	tk, err := q.Submit("a", svgTask(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The backend took it; the address on task:ID:backend was popped by a
	// read whose reply never arrived.
	rdb.LRem(t.Context(), k.Incoming(), 0, tk.ID())
	rdb.HSet(t.Context(), k.Executing(), tk.ID(), "10000")
	const url = "ws://127.0.0.1:1/task/abc"
	rdb.HSet(t.Context(), k.Task(tk.ID()), redisq.FieldBackend, "1", redisq.FieldAddress, url)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	u := next(t, tk)
	if u.End != "" || u.Start == nil || u.Start.BackendID != url {
		t.Fatalf("after the restart: %+v, want the start on %s", u, url)
	}
}

// A task that ends while Redis is down has its keys deleted once Redis is
// back, so that the scheduler frees its slot.
func TestKeysOfATaskEndedDuringAnOutageAreDeletedLater(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	q, rdb := newQueue(t, srv.URL(), Config{})
	k := q.cfg.Keys
	tk, err := q.Submit("a", svgTask(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rdb.RPush(t.Context(), k.TaskBackend(tk.ID()), "ws://127.0.0.1:1/task")
	if u := next(t, tk); u.Start == nil {
		t.Fatalf("got %+v, want the start", u)
	}
	srv.Kill()
	q.Release(tk, true) // the run ended while Redis is down
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 15*time.Second, func() bool {
		return rdb.Exists(t.Context(), k.TaskKeys(tk.ID())...).Val() == 0
	}, "the task's keys deleted after the restart")
}
