package backendrole

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/testwait"
)

// Registration puts the backend in backend.set, on backend.updated and
// its heartbeat key with the TTL; the heartbeat is renewed, and a backend
// the scheduler removed as dead comes back with its next heartbeat.
func TestRegistersAndRenewsHeartbeatPlayingTheScheduler(t *testing.T) {
	e := newEnv(t)
	ttl := 900 * time.Millisecond
	tr := e.startRole(func(c *Config) { c.HeartbeatTTL = ttl })
	ctx := context.Background()
	if ok, err := e.rdb.SIsMember(ctx, e.keys.BackendSet(), tr.ID()).Result(); err != nil || !ok {
		t.Fatalf("backend %s not in backend.set (%v)", tr.ID(), err)
	}
	if got := e.rdb.LRange(ctx, e.keys.BackendUpdated(), 0, -1).Val(); len(got) != 1 || got[0] != tr.ID() {
		t.Fatalf("backend.updated = %v, want [%s]", got, tr.ID())
	}
	first := e.rdb.PTTL(ctx, e.keys.Backend(tr.ID())).Val()
	if first <= 0 || first > ttl {
		t.Fatalf("heartbeat PTTL %v, want in (0, %v]", first, ttl)
	}
	lowest := first
	testwait.Eventually(t, 5*ttl, func() bool {
		p, err := e.rdb.PTTL(ctx, e.keys.Backend(tr.ID())).Result()
		if err != nil {
			t.Fatalf("PTTL of the heartbeat key: %v", err)
		}
		if p <= 0 {
			t.Fatalf("the heartbeat key expired (PTTL %v)", p)
		}
		lowest = min(lowest, p)
		return p > lowest+ttl/9
	}, "the heartbeat renewed (its PTTL went up)")
	// The scheduler declares it dead; the backend lives and says so again.
	e.rdb.LTrim(ctx, e.keys.BackendUpdated(), 1, 0)
	e.rdb.SRem(ctx, e.keys.BackendSet(), tr.ID())
	testwait.Eventually(t, 5*ttl, func() bool {
		in, err := e.rdb.SIsMember(ctx, e.keys.BackendSet(), tr.ID()).Result()
		if err != nil {
			t.Fatalf("SISMEMBER backend.set: %v", err)
		}
		return in
	}, "the backend back in backend.set")
	if got := e.rdb.LRange(ctx, e.keys.BackendUpdated(), 0, -1).Val(); len(got) != 1 || got[0] != tr.ID() {
		t.Fatalf("backend.updated after coming back = %v, want [%s]", got, tr.ID())
	}
}

// Tasks put in Redis as the queue server and the scheduler do are each
// taken by exactly one of two backends; the queue server attached to the
// published URL gets the svg and a successful complete; afterwards the
// slot is freed through queue.processing and queue.finished and no key of
// the backend's is left.
func TestTasksTakenOncePlayingTheSchedulerAndQueueServer(t *testing.T) {
	e := newEnv(t)
	a, b := e.startRole(), e.startRole()
	runTasks(t, e, 4, map[string]bool{a.ID(): true, b.ID(): true})
}

// The same on a 3-master Redis Cluster with the hash-tag prefix: every
// script's keys are in KEYS and in one slot.
func TestTasksOnRedisClusterPlayingTheScheduler(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	e := newEnvOn(t, c.URL(), redisq.DefaultPrefix)
	a := e.startRole()
	runTasks(t, e, 2, map[string]bool{a.ID(): true})
	// The gone-task path of the script on the cluster too.
	e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: e.keys.Outcoming(), Values: map[string]any{"task": "404"}})
	if got := e.finished(10 * time.Second); got != "404" {
		t.Fatalf("queue.finished got %q, want 404", got)
	}
}

// runTasks schedules n figure tasks at once, attaches to each and checks
// each ran once, on one of backends.
func runTasks(t *testing.T, e *env, n int, backends map[string]bool) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.schedule(svgTask().Fields(), figure)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		url := e.address(id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			checkFigure(t, url)
		}()
	}
	wg.Wait()
	finished := map[string]int{}
	for range ids {
		finished[e.finished(30*time.Second)]++
	}
	ctx := context.Background()
	for _, id := range ids {
		if finished[id] != 1 {
			t.Errorf("task %s on queue.finished %d times, want 1 (%v)", id, finished[id], finished)
		}
		if by := e.rdb.HGet(ctx, e.keys.Task(id), redisq.FieldBackend).Val(); !backends[by] {
			t.Errorf("task %s: backend field %q, want one of %v", id, by, backends)
		}
		if n := e.rdb.Exists(ctx, e.keys.TaskFiles(id), e.keys.TaskBackend(id)).Val(); n != 0 {
			t.Errorf("task %s: files or a second address left (%d keys)", id, n)
		}
	}
	checkStreamDrained(t, e)
}

// checkFigure plays the queue server on one task's URL.
func checkFigure(t *testing.T, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exec, s := attach(t, ctx, url)
	out := exec.Wait()
	if !out.Success || out.Error != "" {
		t.Errorf("%s: outcome %+v, output %q", url, out, s.Text(""))
		return
	}
	if s.ImageCount() != 1 || s.Formats()[0] != sandbox.FormatSVG || !sandbox.HasMagic(sandbox.FormatSVG, s.Image(0)) {
		t.Errorf("%s: results %v, want one svg", url, s.Formats())
	}
}

// checkStreamDrained: no entry left in queue.outcoming, none pending, and
// queue.processing empty.
func checkStreamDrained(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	if n := e.rdb.XLen(ctx, e.keys.Outcoming()).Val(); n != 0 {
		t.Errorf("queue.outcoming holds %d entries", n)
	}
	if p := e.rdb.XPending(ctx, e.keys.Outcoming(), redisq.ConsumerGroup).Val(); p != nil && p.Count != 0 {
		t.Errorf("%d entries pending", p.Count)
	}
	if m := e.rdb.SMembers(ctx, e.keys.Processing()).Val(); len(m) != 0 {
		t.Errorf("queue.processing = %v", m)
	}
}

// A task whose task:ID is gone (its client left) goes straight to
// queue.finished, never to queue.processing, and gets no address; the
// backend then runs the next task normally.
func TestGoneTaskGoesToFinishedPlayingTheScheduler(t *testing.T) {
	e := newEnv(t)
	e.startRole()
	id := e.schedule(svgTask().Fields(), figure)
	ctx := context.Background()
	// The queue server deleted the task's keys before the backend took it:
	// schedule again under a fresh ID with no task hash.
	e.rdb.Del(ctx, e.keys.TaskKeys("999")...)
	e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: e.keys.Outcoming(), Values: map[string]any{"task": "999"}})
	checkFigure(t, e.address(id))
	got := []string{e.finished(30 * time.Second), e.finished(30 * time.Second)}
	if !(got[0] == id && got[1] == "999" || got[0] == "999" && got[1] == id) {
		t.Fatalf("queue.finished = %v, want %s and 999 once each", got, id)
	}
	if n := e.rdb.Exists(ctx, e.keys.TaskBackend("999"), e.keys.Task("999")).Val(); n != 0 {
		t.Fatalf("the gone task got keys back (%d)", n)
	}
	checkStreamDrained(t, e)
}

// Bad input loses nothing: an entry naming no task is dropped, a task
// hash the backend cannot read ends the task with a clear error through
// complete, and the backend stays healthy.
func TestMalformedInputPlayingTheScheduler(t *testing.T) {
	e := newEnv(t)
	e.startRole()
	ctx := context.Background()
	e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: e.keys.Outcoming(), Values: map[string]any{"job": "x"}})
	fields := svgTask().Fields()
	fields[redisq.FieldDuration] = "soon"
	id := e.schedule(fields, figure)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	exec, _ := attach(t, cctx, e.address(id))
	out := exec.Wait()
	if out.Success || !strings.Contains(out.Error, `bad duration "soon"`) {
		t.Fatalf("outcome %+v, want the hash's error", out)
	}
	if got := e.finished(10 * time.Second); got != id {
		t.Fatalf("queue.finished got %q, want %s", got, id)
	}
	good := e.schedule(svgTask().Fields(), figure)
	checkFigure(t, e.address(good))
	if got := e.finished(30 * time.Second); got != good {
		t.Fatalf("queue.finished got %q, want %s", got, good)
	}
	checkStreamDrained(t, e)
}

// options {timeout} from the queue server lowers a running task's limit:
// it ends with the protocol's time-limit text.
func TestOptionsTimeoutShortensPlayingTheQueueServer(t *testing.T) {
	e := newEnv(t)
	e.startRole()
	id := e.schedule(svgTask().Fields(), spin)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exec, _ := attach(t, ctx, e.address(id))
	exec.Shorten(500 * time.Millisecond)
	out := exec.Wait()
	if out.Error != "Execution aborted due to the time limit (500ms)" {
		t.Fatalf("outcome %+v, want the shortened time limit", out)
	}
	if got := e.finished(10 * time.Second); got != id {
		t.Fatalf("queue.finished got %q, want %s", got, id)
	}
}

// An interactive task takes input from the queue server and answers it;
// closing the connection ends it.
func TestInteractiveInputPlayingTheQueueServer(t *testing.T) {
	e := newEnv(t)
	tr := e.startRole()
	fields := redisq.TaskOptions{Interactive: true, Format: sandbox.FormatSVG}.Fields()
	id := e.schedule(fields, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exec, s := attach(t, ctx, e.address(id))
	if err := exec.Input([]byte("write(1+2);\n")); err != nil {
		t.Fatal(err)
	}
	s.WaitFor(t, 30*time.Second, func() bool { return s.Text("") == "3\n" }, "the answer 3 as the whole output")
	cancel() // the client left: the queue server closes the connection
	if out := tr.ranOutcome(t); out.Success {
		t.Fatalf("outcome %+v, want aborted", out)
	}
	if got := e.finished(10 * time.Second); got != id {
		t.Fatalf("queue.finished got %q, want %s", got, id)
	}
}

// A queue server that never connects: the run is aborted after the
// accept limit, the slot freed, and the URL is dead.
func TestNoConnectionAbortsRunPlayingTheScheduler(t *testing.T) {
	e := newEnv(t)
	tr := e.startRole(func(c *Config) { c.AcceptTimeout = 500 * time.Millisecond })
	id := e.schedule(svgTask().Fields(), spin)
	url := e.address(id)
	out := tr.ranOutcome(t)
	if out.Success || !strings.HasPrefix(out.Error, "Execution aborted") || out.Time >= testMaxTimeout/2 {
		t.Fatalf("outcome %+v, want aborted long before the time limit", out)
	}
	if got := e.finished(10 * time.Second); got != id {
		t.Fatalf("queue.finished got %q, want %s", got, id)
	}
	if status := dialStatus(t, url); status != http.StatusNotFound {
		t.Fatalf("dial after the accept limit: %d, want 404", status)
	}
}

// Only the task's own token, once, reaches the task: other paths and
// tokens and a second connection are 404.
func TestWrongTokenIs404PlayingTheQueueServer(t *testing.T) {
	e := newEnv(t)
	tr := e.startRole()
	id := e.schedule(svgTask().Fields(), spin)
	url := e.address(id)
	wsBase := "ws" + strings.TrimPrefix(tr.base, "http")
	for _, bad := range []string{wsBase + "/task/" + strings.Repeat("0", 32), wsBase + "/task/", wsBase + "/", url + "x"} {
		if status := dialStatus(t, bad); status != http.StatusNotFound {
			t.Errorf("dial %s: %d, want 404", bad, status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exec, _ := attach(t, ctx, url)
	if status := dialStatus(t, url); status != http.StatusNotFound {
		t.Errorf("second connection: %d, want 404", status)
	}
	exec.Shorten(200 * time.Millisecond)
	if out := exec.Wait(); out.Error != "Execution aborted due to the time limit (200ms)" {
		t.Fatalf("outcome %+v", out)
	}
	for path, want := range map[string]int{"/livez": 200, "/task/x": 404, "/nothing": 404} {
		resp, err := http.Get(tr.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// dialStatus dials a WebSocket URL and returns the HTTP status of the
// refusal (101 if it connected).
func dialStatus(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, nil)
	if err == nil {
		ws.CloseNow()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return resp.StatusCode
}

// Shutdown (SIGTERM) deregisters: an idle backend at once; a busy one
// after its task finished within the drain time, or aborted past it, the
// task's ID then on queue.finished and the queue server told why.
func TestShutdownDeregistersPlayingTheScheduler(t *testing.T) {
	tests := []struct {
		name      string
		source    string // "": no task
		drain     time.Duration
		wantError string
	}{
		{"idle", "", time.Second, ""},
		{"drains", figure, 30 * time.Second, ""},
		{"aborts", spin, 300 * time.Millisecond, "backend shutting down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tr := e.startRole(func(c *Config) { c.Drain = tt.drain })
			var exec interface{ Wait() sandbox.Outcome }
			id := ""
			if tt.source != "" {
				id = e.schedule(svgTask().Fields(), tt.source)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				exec, _ = attach(t, ctx, e.address(id))
			}
			tr.shutdown(t)
			checkDeregistered(t, e, tr.ID())
			if id == "" {
				return
			}
			out := exec.Wait()
			if out.Success != (tt.wantError == "") || out.Error != tt.wantError {
				t.Fatalf("outcome %+v, want error %q", out, tt.wantError)
			}
			if got := e.finished(time.Second); got != id {
				t.Fatalf("queue.finished got %q, want %s", got, id)
			}
		})
	}
}

func checkDeregistered(t *testing.T, e *env, id string) {
	t.Helper()
	ctx := context.Background()
	if n := e.rdb.Exists(ctx, e.keys.Backend(id)).Val(); n != 0 {
		t.Error("backend:ID left")
	}
	if ok := e.rdb.SIsMember(ctx, e.keys.BackendSet(), id).Val(); ok {
		t.Error("still in backend.set")
	}
	if got := e.rdb.LRange(ctx, e.keys.BackendUpdated(), 0, -1).Val(); len(got) != 2 || got[0] != id || got[1] != id {
		t.Errorf("backend.updated = %v, want arrival and departure of %s", got, id)
	}
}

// Register refuses an address queue servers cannot dial.
func TestCheckAdvertise(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"10.0.0.5:8081", true}, {"backend-3.internal:8081", true}, {"[::1]:9000", true},
		{"0.0.0.0:8081", false}, {"[::]:8081", false}, {":8081", false}, {"host", false}, {"host:0", false},
	}
	for _, tt := range tests {
		if err := CheckAdvertise(tt.addr); (err == nil) != tt.ok {
			t.Errorf("CheckAdvertise(%q) = %v, want ok=%v", tt.addr, err, tt.ok)
		}
	}
}
