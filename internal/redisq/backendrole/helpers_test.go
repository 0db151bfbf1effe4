package backendrole

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

// A small figure that renders quickly, and a task that runs until its
// time limit.
const (
	figure = "size(1cm);\ndraw(unitcircle);\n"
	spin   = "while(true) {}\n"
)

// testMaxTimeout is the runner's cap: a spinning task that ends well
// before it was ended by something else.
const testMaxTimeout = 20 * time.Second

// env is one Redis with the roles of a test.
type env struct {
	t    *testing.T
	rdb  redis.UniversalClient
	keys redisq.Keys
	run  backend.Starter // the real sandboxed runner, shared by the roles
}

// newEnv starts a redis-server and a real sandbox runner.
func newEnv(t *testing.T) *env {
	t.Helper()
	srv := redistest.Start(t)
	return newEnvOn(t, srv.URL(), redisq.DefaultPrefix)
}

func newEnvOn(t *testing.T, url, prefix string) *env {
	t.Helper()
	rdb, err := redisq.Open(context.Background(), url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	limits := sandbox.Limits{MaxTimeout: testMaxTimeout, Output: 1 << 20}
	r, err := sandbox.New(sandbox.Config{Limits: limits, WorkRoot: sandboxtest.WorkRoot(t)})
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	return &env{t: t, rdb: rdb, keys: redisq.NewKeys(prefix), run: backend.Sandbox(r)}
}

// testRole is a registered, running backend role behind a real HTTP
// server on a loopback port.
type testRole struct {
	*Role
	base    string // http://host:port
	outcome chan sandbox.Outcome
	stop    context.CancelFunc
	stopped chan error
}

// startRole registers and runs a role; mutate adjusts its Config.
func (e *env) startRole(mutate ...func(*Config)) *testRole {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	tr := &testRole{base: "http://" + ln.Addr().String(), outcome: make(chan sandbox.Outcome, 16), stopped: make(chan error, 1)}
	cfg := Config{
		Redis: e.rdb, Keys: e.keys, Starter: outcomes{e.run, tr.outcome}, Advertise: ln.Addr().String(),
		Block: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	role, err := Register(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	tr.Role = role
	srv := &http.Server{Handler: role.Handler()}
	go func() { _ = srv.Serve(ln) }()
	ctx, cancel := context.WithCancel(context.Background())
	tr.stop = cancel
	go func() { tr.stopped <- role.Run(ctx) }()
	e.t.Cleanup(func() {
		tr.shutdown(e.t)
		srv.Close()
	})
	return tr
}

// shutdown ends Run as SIGTERM does and waits for it (once).
func (tr *testRole) shutdown(t *testing.T) {
	t.Helper()
	tr.stop()
	select {
	case err, ok := <-tr.stopped:
		if ok && err != nil {
			t.Errorf("Run = %v", err)
		}
		if ok {
			close(tr.stopped)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return")
	}
}

// outcomes passes tasks to the real runner and reports each outcome once
// its run is over.
type outcomes struct {
	backend.Starter
	ch chan sandbox.Outcome
}

func (o outcomes) Start(ctx context.Context, t sandbox.Task, sink sandbox.Sink) (backend.Execution, error) {
	e, err := o.Starter.Start(ctx, t, sink)
	if err != nil {
		return nil, err
	}
	return &reported{Execution: e, ch: o.ch}, nil
}

type reported struct {
	backend.Execution
	ch   chan sandbox.Outcome
	once sync.Once
}

func (r *reported) Wait() sandbox.Outcome {
	out := r.Execution.Wait()
	r.once.Do(func() { r.ch <- out })
	return out
}

// ranOutcome waits for the outcome of the role's next run.
func (tr *testRole) ranOutcome(t *testing.T) sandbox.Outcome {
	t.Helper()
	select {
	case out := <-tr.outcome:
		return out
	case <-time.After(testMaxTimeout + 10*time.Second):
		t.Fatal("no run ended")
		return sandbox.Outcome{}
	}
}

// options of a default svg task with main file main.asy.
func svgTask() redisq.TaskOptions {
	return redisq.TaskOptions{Format: sandbox.FormatSVG, Main: "main.asy"}
}

// schedule plays the queue server (task:ID, task:ID:files) and then the
// scheduler (XADD queue.outcoming {task: ID}), and returns the ID.
func (e *env) schedule(fields map[string]any, source string) string {
	e.t.Helper()
	ctx := context.Background()
	n, err := e.rdb.Incr(ctx, e.keys.TaskCounter()).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	id := strconv.FormatInt(n, 10)
	_, err = e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, e.keys.Task(id), fields)
		p.HSet(ctx, e.keys.TaskFiles(id), "main.asy", source)
		p.XAdd(ctx, &redis.XAddArgs{Stream: e.keys.Outcoming(), Values: map[string]any{"task": id}})
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// address plays the queue server waiting for the task's backend address.
func (e *env) address(id string) string {
	e.t.Helper()
	kv, err := e.rdb.BLPop(context.Background(), 30*time.Second, e.keys.TaskBackend(id)).Result()
	if err != nil {
		e.t.Fatalf("no backend address for task %s: %v", id, err)
	}
	return kv[1]
}

// finished plays the scheduler waiting for the next ID on queue.finished.
func (e *env) finished(within time.Duration) string {
	e.t.Helper()
	kv, err := e.rdb.BLPop(context.Background(), within, e.keys.Finished()).Result()
	if err != nil {
		e.t.Fatalf("nothing on queue.finished within %v: %v", within, err)
	}
	return kv[1]
}

// attach plays the queue server: it dials the task's URL in attached
// mode and relays into a new recording Sink.
func attach(t *testing.T, ctx context.Context, url string) (backend.Execution, *sandboxtest.Sink) {
	t.Helper()
	s := sandboxtest.NewSink()
	e, err := (&backend.Remote{URL: url, Attached: true}).Start(ctx, sandbox.Task{}, s)
	if err != nil {
		t.Fatalf("attach %s: %v", url, err)
	}
	return e, s
}
