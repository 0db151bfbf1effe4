package frontend

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/sandbox"
)

// These tests drive the queue server's side against a real redis-server;
// the test plays the scheduler and the backend with plain commands.

func newQueue(t *testing.T, url string, cfg Config) (*Queue, redis.UniversalClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rdb, err := redisq.Open(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	if cfg.Keys == (redisq.Keys{}) {
		cfg.Keys = redisq.NewKeys(redisq.DefaultPrefix)
	}
	cfg.Wait = 100 * time.Millisecond
	cfg.Quiet = time.Second
	return New(ctx, rdb, cfg), rdb
}

func svgTask(timeout time.Duration) sandbox.Task {
	return sandbox.Task{Timeout: timeout, Format: "svg", Files: []sandbox.File{
		{Name: "main.asy", Data: []byte("draw((0,0)--(1,1));"), Main: true},
		{Name: "lib.asy", Data: []byte("real x = 1;")},
	}}
}

// next waits for the ticket's next update.
func next(t *testing.T, tk *asyqueue.Ticket) asyqueue.Update {
	t.Helper()
	select {
	case <-tk.Changed():
		return tk.Take()
	case <-time.After(10 * time.Second):
		t.Fatal("no update within 10 s")
		return asyqueue.Update{}
	}
}

func TestSubmitWritesTheSeedsKeys(t *testing.T) {
	srv := redistest.Start(t)
	q, rdb := newQueue(t, srv.URL(), Config{Node: "fe-1"})
	ctx := t.Context()
	tk, err := q.Submit("10.0.0.1", svgTask(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	k := q.cfg.Keys
	if got := rdb.LRange(ctx, k.Incoming(), 0, -1).Val(); len(got) != 1 || got[0] != tk.ID() {
		t.Fatalf("queue.incoming = %v, want [%s]", got, tk.ID())
	}
	h := rdb.HGetAll(ctx, k.Task(tk.ID())).Val()
	opts, err := redisq.ParseOptions(h)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Duration != 3*time.Second || opts.Format != "svg" || opts.Main != "main.asy" || h[redisq.FieldFrontend] != "fe-1" {
		t.Fatalf("task hash = %v", h)
	}
	files := rdb.HGetAll(ctx, k.TaskFiles(tk.ID())).Val()
	if files["main.asy"] != "draw((0,0)--(1,1));" || files["lib.asy"] != "real x = 1;" {
		t.Fatalf("files hash = %v", files)
	}
	for _, key := range []string{k.Task(tk.ID()), k.TaskFiles(tk.ID())} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 590*time.Second || ttl > redisq.TaskTTL {
			t.Fatalf("%s expires in %v, want about 600 s", key, ttl)
		}
	}
	if next := rdb.Get(ctx, k.TaskCounter()).Val(); next != tk.ID() {
		t.Fatalf("task.counter = %s, id %s", next, tk.ID())
	}
}

func TestNewsFromTheSchedulerReachTheSession(t *testing.T) {
	srv := redistest.Start(t)
	q, rdb := newQueue(t, srv.URL(), Config{})
	ctx := t.Context()
	k := q.cfg.Keys
	tk, err := q.Submit("a", svgTask(0))
	if err != nil {
		t.Fatal(err)
	}
	id := tk.ID()

	rdb.HSet(ctx, k.Task(id), redisq.FieldPosition, 4)
	rdb.RPush(ctx, k.TaskEstimate(id), redisq.FormatEstimate(2500*time.Millisecond, true))
	u := next(t, tk)
	if u.Estimate == nil || u.Estimate.Wait != 2500*time.Millisecond || !u.Estimate.Known || u.Estimate.Position != 4 {
		t.Fatalf("estimate update = %+v", u.Estimate)
	}
	rdb.RPush(ctx, k.TaskEstimate(id), "inf")
	if u := next(t, tk); u.Estimate == nil || u.Estimate.Known {
		t.Fatalf("estimate inf = %+v, want unknown", u.Estimate)
	}

	rdb.RPush(ctx, k.TaskBackend(id), "ws://127.0.0.1:1/task/abc")
	u = next(t, tk)
	r, ok := u.Start.Backend.(*backend.Remote)
	if u.Start == nil || !ok || r.URL != "ws://127.0.0.1:1/task/abc" || !r.Attached {
		t.Fatalf("start = %+v", u.Start)
	}

	rdb.RPush(ctx, k.TaskControl(id), redisq.Control{Kind: redisq.ControlTimeout, Timeout: 3 * time.Second}.String())
	if u := next(t, tk); u.Shorten != 3*time.Second {
		t.Fatalf("shorten = %v, want 3s", u.Shorten)
	}
	rdb.RPush(ctx, k.TaskControl(id), "garbage from a confused writer")
	rdb.RPush(ctx, k.TaskControl(id), redisq.Control{Kind: redisq.ControlEnd, Text: "Interactive task halted"}.String())
	if u := next(t, tk); u.End != "Interactive task halted" {
		t.Fatalf("end = %q", u.End)
	}

	q.Release(tk, true)
	for _, key := range k.TaskKeys(id) {
		if rdb.Exists(ctx, key).Val() != 0 {
			t.Fatalf("%s left behind", key)
		}
	}
	if n := rdb.LLen(ctx, k.Finished()).Val(); n != 0 {
		t.Fatalf("queue.finished has %d entries; the backend, not the queue server, frees a started task's slot", n)
	}
}

func TestDeniedInteractiveTask(t *testing.T) {
	srv := redistest.Start(t)
	q, rdb := newQueue(t, srv.URL(), Config{})
	tk, err := q.Submit("a", sandbox.Task{Interactive: true, Files: []sandbox.File{{Name: "x.asy", Main: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if v := rdb.HGet(t.Context(), q.cfg.Keys.Task(tk.ID()), redisq.FieldInteractive).Val(); v != "1" {
		t.Fatalf("interactive field = %q", v)
	}
	rdb.RPush(t.Context(), q.cfg.Keys.TaskControl(tk.ID()), "denied no free backend for an interactive task")
	if u := next(t, tk); u.End != "no free backend for an interactive task" || u.Start != nil {
		t.Fatalf("update = %+v", u)
	}
	q.Release(tk, false)
}

func TestAbortWhileQueuedGivesTheTaskBack(t *testing.T) {
	srv := redistest.Start(t)
	q, rdb := newQueue(t, srv.URL(), Config{})
	ctx := t.Context()
	k := q.cfg.Keys
	tk, err := q.Submit("a", svgTask(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rdb.RPush(ctx, k.TaskEstimate(tk.ID()), "1.5")
	next(t, tk)
	q.Release(tk, false)
	if got := rdb.LRange(ctx, k.Finished(), 0, -1).Val(); len(got) != 1 || got[0] != tk.ID() {
		t.Fatalf("queue.finished = %v, want the aborted task", got)
	}
	for _, key := range k.TaskKeys(tk.ID()) {
		if rdb.Exists(ctx, key).Val() != 0 {
			t.Fatalf("%s left behind", key)
		}
	}
}

func TestCapsAndBadTimeouts(t *testing.T) {
	srv := redistest.Start(t)
	q, rdb := newQueue(t, srv.URL(), Config{Caps: asyqueue.Caps{MaxQueued: 4, MaxQueuedPerClient: 2}})
	ctx := t.Context()
	if _, err := q.Submit("a", svgTask(5*time.Second)); !errors.Is(err, asyqueue.ErrInvalidLimit) {
		t.Fatalf("5 s timeout: %v, want ErrInvalidLimit", err)
	}
	a1, err := q.Submit("a", svgTask(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit("a", svgTask(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit("a", svgTask(0)); !errors.Is(err, asyqueue.ErrQueueFull) {
		t.Fatalf("third of client a: %v, want ErrQueueFull", err)
	}
	if _, err := q.Submit("b", svgTask(0)); err != nil {
		t.Fatal(err)
	}
	// Another queue server's task in the scheduler's queue: the cap is
	// over all of them (3 in queue.incoming + 1 in queue).
	rdb.ZAdd(ctx, q.cfg.Keys.Queue(), redis.Z{Score: 1, Member: "elsewhere"})
	if _, err := q.Submit("c", svgTask(0)); !errors.Is(err, asyqueue.ErrQueueFull) {
		t.Fatalf("over the global cap: %v, want ErrQueueFull", err)
	}
	rdb.ZRem(ctx, q.cfg.Keys.Queue(), "elsewhere")
	if _, err := q.Submit("c", svgTask(0)); err != nil {
		t.Fatalf("under the global cap again: %v", err)
	}
	q.Release(a1, false)
	rdb.LPop(ctx, q.cfg.Keys.Incoming()) // the scheduler took one
	if _, err := q.Submit("a", svgTask(0)); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

func TestRedisDownDeniesClearly(t *testing.T) {
	srv := redistest.Start(t)
	q, _ := newQueue(t, srv.URL(), Config{})
	srv.Kill()
	_, err := q.Submit("a", svgTask(0))
	if !errors.Is(err, errUnavailable) {
		t.Fatalf("Submit with redis down: %v, want %v", err, errUnavailable)
	}
}

func TestSubmitOnRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	q, rdb := newQueue(t, cl.URL(), Config{})
	tk, err := q.Submit("a", svgTask(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rdb.RPush(t.Context(), q.cfg.Keys.TaskBackend(tk.ID()), "ws://127.0.0.1:1/task/x")
	if u := next(t, tk); u.Start == nil {
		t.Fatalf("update = %+v, want a start", u)
	}
	q.Release(tk, true)
	if n := rdb.Exists(t.Context(), q.cfg.Keys.TaskKeys(tk.ID())...).Val(); n != 0 {
		t.Fatalf("%d task keys left on the cluster", n)
	}
}
