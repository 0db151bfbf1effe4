package jobsrole

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
)

const admin = "usher_jobsrole-test-admin-token"

// The test plays the scheduler's leadership: it sets scheduler.leader
// itself and runs WhileLeading for one term.
func TestServesV1OnlyWhileLeading(t *testing.T) {
	ctx := t.Context()
	r, rdb, keys, base := newRole(t, redistest.Start(t), nil)
	serveCtx, stopServing := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- r.Serve(serveCtx) }()
	defer func() { stopServing(); <-served }()

	if code := get(t, base+"/v1/queues"); code != http.StatusServiceUnavailable {
		t.Fatalf("standing by: GET /v1/queues = %d, want 503", code)
	}
	if _, ok := r.Stats(); ok {
		t.Fatal("standing by: Stats reports an engine")
	}
	rdb.Set(ctx, keys.Leader(), "1:a", 0)
	term, endTerm := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.WhileLeading(term, "1:a") }()
	testwait.Eventually(t, 10*time.Second, func() bool { return rdb.Get(ctx, keys.SchedulerAPI()).Val() == base }, "scheduler.api names the leader")
	if code := get(t, base+"/v1/queues"); code != http.StatusOK {
		t.Fatalf("leading: GET /v1/queues = %d, want 200", code)
	}
	if st, ok := r.Stats(); !ok || st.Queues == nil {
		t.Fatalf("leading: Stats = %+v, %v; want the engine's", st, ok)
	}

	// Another node takes the lease: the term stops publishing and serving.
	rdb.Set(ctx, keys.Leader(), "2:b", 0)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("WhileLeading went on after another node took the lease")
	}
	endTerm()
	if n := rdb.Exists(ctx, keys.SchedulerAPI()).Val(); n != 0 {
		t.Fatal("scheduler.api still names a node that no longer leads")
	}
	if code := get(t, base+"/v1/queues"); code != http.StatusServiceUnavailable {
		t.Fatalf("after the term: GET /v1/queues = %d, want 503", code)
	}
	if _, ok := r.Stats(); ok {
		t.Fatal("after the term: Stats reports an engine")
	}
}

// newRole makes a role on srv that logs to logs (nil: nowhere) and serves
// /v1 on a loopback listener. It returns the role, a client of srv
// (closed when the test ends), the keys, and the role's base URL.
func newRole(t *testing.T, srv *redistest.Server, logs *testbin.LogBuffer) (*Role, redis.UniversalClient, redisq.Keys, string) {
	t.Helper()
	rdb, err := redisq.Open(t.Context(), srv.URL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	var h slog.Handler = slog.DiscardHandler
	if logs != nil {
		h = slog.NewTextHandler(logs, nil)
	}
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	r, err := New(t.Context(), Config{Client: rdb, Keys: keys, Listener: ln, Advertise: base, AdminToken: admin,
		AdminTokenFile: filepath.Join(t.TempDir(), "token"), PublishEvery: 20 * time.Millisecond, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	return r, rdb, keys, base
}

func get(t *testing.T, url string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// A term that begins while Redis is down (restarting: a standby takes the
// lead as Redis comes back) rebuilds the engine once Redis answers again,
// instead of leaving /v1 unserved for the whole term.
func TestTermBeginningWhileRedisIsDownServesOnceItIsBack(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	ctx := t.Context()
	var logs testbin.LogBuffer
	r, rdb, keys, base := newRole(t, srv, &logs)
	serveCtx, stopServing := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- r.Serve(serveCtx) }()
	defer func() { stopServing(); <-served }()
	rdb.Set(ctx, keys.Leader(), "1:a", 0)

	srv.Kill()
	term, endTerm := context.WithCancel(ctx)
	defer endTerm()
	done := make(chan struct{})
	go func() { defer close(done); r.WhileLeading(term, "1:a") }()
	if code := get(t, base+"/v1/queues"); code != http.StatusServiceUnavailable {
		t.Fatalf("Redis down: GET /v1/queues = %d, want 503", code)
	}
	// Redis stays down until the term has failed to rebuild at least once
	// (past go-redis's own few quick retries).
	testwait.Eventually(t, 10*time.Second, func() bool {
		select {
		case <-done:
			t.Fatalf("the term gave up while Redis was down:\n%s", logs.String())
		default:
		}
		return logs.Contains("cannot rebuild the engine from redis; retrying")
	}, "the term retries the rebuild")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return get(t, base+"/v1/queues") == http.StatusOK }, "/v1 served once Redis is back")
	endTerm()
	testwait.Receive(t, 10*time.Second, done, "WhileLeading returning after its term ended")
}

// A term that ends while the engine is still being rebuilt (Redis down,
// then the lease lost or the node stopping) is not a failure: the role
// stops retrying, logs no error and leaves /v1 to the next leader.
func TestTermEndingBeforeTheRebuildLogsNoError(t *testing.T) {
	srv := redistest.Start(t)
	var logs testbin.LogBuffer
	r, _, _, _ := newRole(t, srv, &logs)
	srv.Kill()
	term, endTerm := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.WhileLeading(term, "1:a") }()
	testwait.Eventually(t, 10*time.Second, func() bool {
		return logs.Contains("cannot rebuild the engine from redis; retrying")
	}, "the term retries the rebuild")
	endTerm()
	testwait.Receive(t, 10*time.Second, done, "WhileLeading returning after its term ended")
	if logs.Contains("level=ERROR") {
		t.Fatalf("a term that ended before the rebuild logged an error:\n%s", logs.String())
	}
	if !logs.Contains("the term ended before the engine was rebuilt") {
		t.Fatalf("the early end of the term is not logged:\n%s", logs.String())
	}
	if _, ok := r.Stats(); ok {
		t.Fatal("after the term: Stats reports an engine")
	}
}
