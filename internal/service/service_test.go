package service

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
	"github.com/usherhq/usher/internal/testwait"
)

const (
	quickFigure = "draw((0,0)--(1,1));\n"
	spinForever = "while(true) {}\n"
)

type testService struct {
	*Service
	srv     *httptest.Server
	workDir string
	// admin is an admin token, for the operator views.
	admin string
}

// startService runs the embedded default with real sandboxed backends
// on a loopback HTTP server.
func startService(t testing.TB, backends int, mutate func(*Config)) *testService {
	t.Helper()
	work := sandboxtest.WorkRoot(t)
	cfg := Config{
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		DataPath:      filepath.Join(t.TempDir(), "usher.db"),
		LocalBackends: backends,
		CacheBytes:    8 << 20,
		UploadBytes:   8 << 20,
		Sandbox:       sandbox.Config{WorkRoot: work},
		Queue:         asyqueue.Config{MaxUpload: 64 << 10, IdleBeforeRun: 2 * time.Second},
		Caps:          asyqueue.Caps{MaxQueuedPerClient: 1000},
		Dispatcher:    asyqueue.DispatcherConfig{EstimateEvery: 100 * time.Millisecond, EstimateResend: 300 * time.Millisecond},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(func() {
		srv.Close()
		svc.close()
	})
	ts := &testService{Service: svc, srv: srv, workDir: work, admin: cfg.Jobs.AdminToken}
	if ts.admin == "" && cfg.Redis.URL == "" {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(cfg.DataPath), "usher-admin.token"))
		if err != nil {
			t.Fatal(err)
		}
		ts.admin = strings.TrimSpace(string(data))
	}
	return ts
}

// adminGet is a GET of an operator view with the admin token.
func (ts *testService) adminGet(t testing.TB, ctx context.Context, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ts.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// waitIdle waits until nothing is queued or running and no task work
// directory is left. (A spare display for 3D tasks, usher-x-*, may stay
// between tasks; shutdown removes it.)
func (ts *testService) waitIdle(t *testing.T) {
	t.Helper()
	var busy, dirs int
	err := testwait.Until(20*time.Second, func() bool {
		snap, err := ts.dispatcher().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := filepath.Glob(filepath.Join(ts.workDir, "usher-task-*"))
		busy, dirs = snap.Queues[0].Queued+snap.Tiers[0].Counted, len(entries)
		return busy == 0 && dirs == 0
	}, "idle")
	if err != nil {
		t.Fatalf("%v: %d queued or running, %d work directories left", err, busy, dirs)
	}
}

// sphere3D is a 3D figure: a task that draws it gets a virtual display.
const sphere3D = "import three; size(2cm); draw(unitsphere, red);\n"

// Every format /api/info lists compiles through the queue, svg, pdf
// and png with a 2D figure and html, eps and v3d with a 3D one, and a second
// identical task is answered from the result cache with the same bytes.
func TestEachFormatCompiles(t *testing.T) {
	tests := []struct{ name, format, figure string }{
		{"svg", "svg", quickFigure}, {"pdf", "pdf", quickFigure}, {"png", "png", quickFigure},
		{"html 3D", "html", sphere3D}, {"eps 3D", "eps", sphere3D}, {"v3d 3D", "v3d", sphere3D}, {"png 3D", "png", sphere3D},
	}
	ts := startService(t, 2, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := compileResult(t, ts, tt.figure, tt.format)
			again := compileResult(t, ts, tt.figure, tt.format)
			if !bytes.Equal(first, again) {
				t.Fatalf("the cached %s differs from the first run's", tt.format)
			}
			if tt.format == "html" && bytes.Contains(bytes.ToLower(first), []byte("<script src")) {
				t.Fatal("the html result loads a script from elsewhere; asy -offline inlines it")
			}
		})
	}
}

// compileResult runs figure in format through the queue, checks the
// messages (queue, one result of that format, a successful complete) and
// returns the result's bytes.
func compileResult(t *testing.T, ts *testService, figure, format string) []byte {
	t.Helper()
	c := dial(t, ts.srv)
	c.compile(figure, map[string]any{"format": format})
	all := c.rest()
	if got := verbs(all); strings.Join(got, " ") != "queue result complete" {
		t.Fatalf("messages %v, want queue result complete", got)
	}
	if all[0].body["passed"] != true {
		t.Fatalf("queue = %v, want passed", all[0].body)
	}
	if all[1].body["format"] != format || !sandbox.HasMagic(format, all[1].payload) {
		t.Fatalf("result %v starts %q", all[1].body, all[1].payload[:min(16, len(all[1].payload))])
	}
	if done := all[2].body; done["success"] != true || done["time"] == nil {
		t.Fatalf("complete = %v, want success with a time", done)
	}
	return all[1].payload
}

func TestSyntaxErrorReportsAsyMessageAndCode(t *testing.T) {
	ts := startService(t, 1, nil)
	c := dial(t, ts.srv)
	c.compile("draw((0,0)--;\n", nil)
	all := c.rest()
	done := final(t, all)
	if done.body["success"] != false || done.body["error"] != "Execution failed with code 1" {
		t.Fatalf("complete = %v", done.body)
	}
	var out []byte
	for _, m := range all {
		if m.verb == "output" {
			out = append(out, m.payload...)
		}
	}
	if !bytes.Contains(out, []byte("syntax error")) {
		t.Fatalf("output %q lacks asy's syntax error", out)
	}
}

func TestBadRequestsAreDenied(t *testing.T) {
	ts := startService(t, 1, func(c *Config) { c.Queue.MaxFiles = 3 })
	cases := []struct {
		name string
		send func(c *client)
		want string
	}{
		{"hash mismatch", func(c *client) {
			c.conn.SendPayload(c.ctx, "add", map[string]any{"filename": "a.asy", "main": true, "hash": strings.Repeat("0", 64)}, []byte(quickFigure))
		}, `hash mismatch for "a.asy"`},
		{"hash not hex", func(c *client) {
			c.send("add", map[string]any{"filename": "a.asy", "hash": "XYZ", "restore": true})
		}, "64 lowercase hex digits"},
		{"path in file name", func(c *client) {
			c.send("add", map[string]any{"filename": "../a.asy", "hash": strings.Repeat("a", 64), "restore": true})
		}, `file name contains "/"`},
		{"timeout not a tier", func(c *client) { c.send("options", map[string]any{"timeout": 5000}) },
			`option "timeout" must be one of 3000, 10000 or 30000 (milliseconds)`},
		{"unknown option", func(c *client) { c.send("options", map[string]any{"colour": "red"}) }, `unknown option "colour"`},
		{"mistyped option", func(c *client) { c.send("options", map[string]any{"timeout": "3000"}) }, `option "timeout" must be an integer`},
		{"bad format", func(c *client) { c.send("options", map[string]any{"format": "gif"}) }, `option "format" must be`},
		{"no files", func(c *client) { c.send("run", nil) }, `"run" with no files`},
		{"no main file", func(c *client) { c.add("a.asy", quickFigure, false); c.send("run", nil) }, "no main file"},
		{"two main files", func(c *client) {
			c.add("a.asy", quickFigure, true)
			c.add("b.asy", quickFigure+"//", true)
			c.send("run", nil)
		}, "two main files"},
		{"same file twice", func(c *client) { c.add("a.asy", quickFigure, true); c.add("a.asy", quickFigure, false) }, `file "a.asy" added twice`},
		{"too many files", func(c *client) {
			for i := range 4 {
				c.add(fmt.Sprintf("f%d.asy", i), quickFigure, i == 0)
			}
		}, "too many files: at most 3"},
		{"upload too large", func(c *client) { c.add("a.asy", strings.Repeat("//", 40<<10), true) }, "upload too large"},
		{"input before run", func(c *client) { c.conn.SendPayload(c.ctx, "input", nil, []byte("1;")) }, `"input" before "run"`},
		{"unknown verb", func(c *client) { c.sendRaw(websocket.MessageText, []byte("frobnicate {}")) }, `unknown message "frobnicate"`},
		{"malformed JSON", func(c *client) { c.sendRaw(websocket.MessageText, []byte(`options {"format":`)) }, "malformed JSON"},
		{"binary header", func(c *client) { c.sendRaw(websocket.MessageBinary, []byte("run")) }, "binary message where a header is due"},
		{"no run in time", func(c *client) { c.add("a.asy", quickFigure, true) }, `no "run" within 2s`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts.srv)
			tc.send(c)
			done := final(t, c.rest())
			if done.verb != "denied" || !strings.Contains(fmt.Sprint(done.body["error"]), tc.want) {
				t.Fatalf("%s %v, want denied containing %q", done.verb, done.body, tc.want)
			}
		})
	}
	t.Run("server still serves", func(t *testing.T) {
		c := dial(t, ts.srv)
		c.compile(quickFigure, nil)
		if done := final(t, c.rest()); done.body["success"] != true {
			t.Fatalf("complete = %v", done.body)
		}
	})
}

func TestRestoreHitMissAndSecondMiss(t *testing.T) {
	ts := startService(t, 1, func(c *Config) { c.CacheBytes = 0 })
	uploaded := "draw(unitcircle);\n"
	first := dial(t, ts.srv)
	first.compile(uploaded, nil)
	final(t, first.rest())

	t.Run("hit", func(t *testing.T) {
		c := dial(t, ts.srv)
		c.restore("main.asy", uploaded, true)
		c.send("run", nil)
		if done := final(t, c.rest()); done.body["success"] != true {
			t.Fatalf("complete = %v", done.body)
		}
	})
	t.Run("miss then re-add", func(t *testing.T) {
		c := dial(t, ts.srv)
		fresh := "draw(unitsquare);\n"
		c.restore("main.asy", fresh, true)
		c.send("run", nil)
		m, _ := c.next()
		if m.verb != "missing" || len(m.list) != 1 {
			t.Fatalf("got %s %v, want missing with one file", m.verb, m.list)
		}
		entry := m.list[0].(map[string]any)
		if entry["filename"] != "main.asy" || entry["hash"] == "" {
			t.Fatalf("missing entry %v", entry)
		}
		c.add("main.asy", fresh, true)
		c.send("run", nil)
		if done := final(t, c.rest()); done.body["success"] != true {
			t.Fatalf("complete = %v", done.body)
		}
	})
	t.Run("second miss", func(t *testing.T) {
		c := dial(t, ts.srv)
		c.restore("main.asy", "never uploaded", true)
		c.send("run", nil)
		if m, _ := c.next(); m.verb != "missing" {
			t.Fatalf("got %s, want missing", m.verb)
		}
		c.send("run", nil)
		if done := final(t, c.rest()); done.verb != "denied" {
			t.Fatalf("got %s %v, want denied", done.verb, done.body)
		}
	})
}

// occupy starts n tasks that spin until their 3 s limit and returns
// their clients once each has passed the queue.
func occupy(t *testing.T, ts *testService, n int, options map[string]any) []*client {
	t.Helper()
	var cs []*client
	for i := range n {
		c := dial(t, ts.srv)
		c.compile(fmt.Sprintf("%s// %d\n", spinForever, i), options)
		if _, q := c.until("queue"); q.body["passed"] != true {
			t.Fatalf("spinner %d queued: %v", i, q.body)
		}
		cs = append(cs, c)
	}
	return cs
}

func TestCachedResultSkipsTheQueue(t *testing.T) {
	ts := startService(t, 1, nil)
	c := dial(t, ts.srv)
	c.compile(quickFigure, nil)
	want := final(t, c.rest())
	occupy(t, ts, 1, map[string]any{"timeout": 3000})
	again := dial(t, ts.srv)
	start := time.Now()
	again.compile(quickFigure, nil)
	all := again.rest()
	if got := strings.Join(verbs(all), " "); got != "queue result complete" {
		t.Fatalf("cached answer %s", got)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("cached answer took %v while the only backend is busy", took)
	}
	if all[2].body["time"] != want.body["time"] {
		t.Fatalf("cached time %v, want the original run's %v", all[2].body["time"], want.body["time"])
	}
}

func TestEstimatesShrinkAsTheQueueDrains(t *testing.T) {
	ts := startService(t, 1, nil)
	occupy(t, ts, 1, map[string]any{"timeout": 3000})
	c := dial(t, ts.srv)
	c.compile(quickFigure, map[string]any{"timeout": 3000})
	var estimates []float64
	for {
		m, ok := c.next()
		if !ok || m.verb != "queue" {
			t.Fatalf("got %s before passing the queue", m.verb)
		}
		if m.body["passed"] == true {
			break
		}
		if e, ok := m.body["estimate"].(float64); ok {
			estimates = append(estimates, e)
		}
	}
	if len(estimates) < 2 || estimates[0] <= 0 || estimates[len(estimates)-1] >= estimates[0] {
		t.Fatalf("estimates %v: want several, shrinking", estimates)
	}
	if estimates[0] > 3000 {
		t.Fatalf("first estimate %v ms, but the task ahead has at most 3000 ms left", estimates[0])
	}
}

// queuedPosition reads queue messages until one not passed and returns its
// position (-1 when absent).
func queuedPosition(t *testing.T, c *client) float64 {
	t.Helper()
	_, q := c.until("queue")
	if q.body["passed"] != false {
		t.Fatalf("queue %v, want not passed", q.body)
	}
	if p, ok := q.body["position"].(float64); ok {
		return p
	}
	return -1
}

func TestQueuedClientsAreToldTheirPosition(t *testing.T) {
	ts := startService(t, 1, nil)
	spinner := occupy(t, ts, 1, map[string]any{"timeout": 10000})[0]
	first := dial(t, ts.srv)
	first.compile(quickFigure, map[string]any{"timeout": 3000})
	if p := queuedPosition(t, first); p != 0 {
		t.Fatalf("first queued task told position %v, want 0", p)
	}
	second := dial(t, ts.srv)
	second.compile(quickFigure+"// second\n", map[string]any{"timeout": 3000})
	if p := queuedPosition(t, second); p != 1 {
		t.Fatalf("second queued task told position %v, want 1", p)
	}
	first.close()
	p := queuedPosition(t, second)
	for p == 1 { // a resend may have crossed the close
		p = queuedPosition(t, second)
	}
	if p != 0 {
		t.Fatalf("second task told position %v once the first left, want 0", p)
	}
	spinner.close()
	if done := final(t, second.rest()); done.body["success"] != true {
		t.Fatalf("second task ended %v", done.body)
	}
}

func TestDefaultTaskDowngradedWhenSlowTaskArrives(t *testing.T) {
	ts := startService(t, 2, nil) // slow limit 1, medium limit 1
	def := dial(t, ts.srv)
	def.compile(spinForever, nil) // runs as slow on an idle server
	def.until("queue")
	slow := dial(t, ts.srv)
	slow.compile(spinForever+"// slow\n", map[string]any{"timeout": 30000})
	if _, q := slow.until("queue"); q.body["passed"] != true {
		// the slow task may be queued for a moment before the downgrade frees the slow slot
		if _, q = slow.until("queue"); q.body["passed"] != true {
			t.Fatalf("slow task not started: %v", q.body)
		}
	}
	done := final(t, def.rest())
	if done.body["error"] != "Execution aborted due to the time limit (3000ms)" {
		t.Fatalf("default task ended with %v, want the fast limit after a downgrade", done.body)
	}
	slow.close()
	ts.waitIdle(t)
}

func TestInteractiveShellEvaluatesInput(t *testing.T) {
	ts := startService(t, 1, nil)
	c := dial(t, ts.srv)
	c.add("main.asy", "", true)
	c.send("options", map[string]any{"interactive": true})
	c.send("run", nil)
	if _, q := c.until("queue"); q.body["passed"] != true {
		t.Fatalf("interactive queue %v", q.body)
	}
	if err := c.conn.SendPayload(c.ctx, "input", nil, []byte("write(1+2);\n")); err != nil {
		t.Fatal(err)
	}
	for {
		m, ok := c.next()
		if !ok {
			t.Fatal("closed before the shell answered")
		}
		if m.verb == "output" && bytes.Contains(m.payload, []byte("3")) {
			break
		}
	}
	c.close()
	ts.waitIdle(t)
}

func TestInteractiveDeniedWhenEveryBackendIsBusy(t *testing.T) {
	ts := startService(t, 2, nil)
	occupy(t, ts, 2, map[string]any{"timeout": 3000})
	c := dial(t, ts.srv)
	c.add("main.asy", "", true)
	c.send("options", map[string]any{"interactive": true})
	c.send("run", nil)
	if done := final(t, c.rest()); done.verb != "denied" || done.body["error"] != asyqueue.ErrNoBackend.Error() {
		t.Fatalf("got %s %v, want denied: no free backend", done.verb, done.body)
	}
}

func TestInteractiveHaltedWhenQueuedTaskNeedsItsBackend(t *testing.T) {
	ts := startService(t, 2, nil)
	shells := make([]*client, 2)
	for i := range shells {
		shells[i] = dial(t, ts.srv)
		shells[i].add("main.asy", "", true)
		shells[i].send("options", map[string]any{"interactive": true})
		shells[i].send("run", nil)
		if _, q := shells[i].until("queue"); q.body["passed"] != true {
			t.Fatalf("shell %d: %v", i, q.body)
		}
	}
	task := dial(t, ts.srv)
	task.compile(quickFigure, map[string]any{"timeout": 3000})
	if got := final(t, task.rest()); got.body["success"] != true {
		t.Fatalf("queued task %v", got.body)
	}
	// The halt came before the task could start, so the halted shell's
	// last message is already there; the survivor sends nothing more.
	halted := 0
	for _, sh := range shells {
		ctx, cancel := context.WithTimeout(sh.ctx, time.Second)
		h, err := sh.conn.ReadHeader(ctx)
		cancel()
		if err == nil && h.Verb == "complete" && strings.Contains(string(h.Body), "halted") {
			halted++
		}
		sh.close()
	}
	if halted != 1 {
		t.Fatalf("%d shells halted, want exactly 1 (one slot was needed)", halted)
	}
	ts.waitIdle(t)
}

func TestClientGoneLeavesNothingBehind(t *testing.T) {
	ts := startService(t, 1, nil)
	before := runtime.NumGoroutine()
	running := occupy(t, ts, 1, map[string]any{"timeout": 30000})[0]
	queued := dial(t, ts.srv)
	queued.compile(quickFigure, map[string]any{"timeout": 3000})
	if _, q := queued.until("queue"); q.body["passed"] != false {
		t.Fatalf("second task not queued: %v", q.body)
	}
	queued.close()
	running.close()
	ts.waitIdle(t)
	// The test's own client readers may linger briefly.
	testwait.Eventually(t, 10*time.Second, func() bool { return runtime.NumGoroutine() <= before+2 },
		"goroutines back to %d (+2)", before)
}

// 120 clients at once against a queue of 10 on 2 backends: each gets
// exactly one end — a complete, a queue-full denial or, for a client the
// loaded machine kept from sending its "run" in time, that rule's denial —
// and at least a queue's worth complete. (The queue is kept short so that
// its tasks end well within the clients' 60 s while other packages' tests
// load the machine.)
func TestManyConcurrentClientsEachGetExactlyOneEnd(t *testing.T) {
	const clients, maxQueued = 120, 10
	ts := startService(t, 2, func(c *Config) { c.Caps.MaxQueued = maxQueued })
	timeouts := []any{nil, 3000, 10000, 30000}
	var wg sync.WaitGroup
	ends := make(chan string, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, ts.srv)
			opts := map[string]any{}
			if to := timeouts[i%4]; to != nil {
				opts["timeout"] = to
			}
			c.compile(fmt.Sprintf("draw((0,0)--(%d,1));\n", 1+i%25), opts)
			var terminal []string
			for _, m := range c.rest() {
				switch {
				case m.verb == "complete" && m.body["success"] == true:
					terminal = append(terminal, "ok")
				case m.verb == "complete":
					terminal = append(terminal, fmt.Sprint("failed: ", m.body["error"]))
				case m.verb == "denied":
					terminal = append(terminal, fmt.Sprint("denied: ", m.body["error"]))
				}
			}
			ends <- strings.Join(terminal, "+")
		}()
	}
	wg.Wait()
	close(ends)
	counts := map[string]int{}
	for e := range ends {
		counts[e]++
	}
	late := 0
	for end, n := range counts {
		if strings.HasPrefix(end, `denied: no "run" within`) && !strings.Contains(end, "+") {
			late += n
		}
	}
	if counts["ok"]+counts["denied: queue full"]+late != clients || counts["ok"] < maxQueued {
		t.Fatalf("ends %v: want each client one complete or denial, at least %d completes", counts, maxQueued)
	}
	ts.waitIdle(t)
}

// TestBackendIsFreeOnceTheClientSeesTheClose checks the order of a task's
// end: the slot is given back before the connection closes, so a client
// that sends its next task on seeing the close finds the backend free.
func TestBackendIsFreeOnceTheClientSeesTheClose(t *testing.T) {
	ts := startService(t, 1, func(c *Config) { c.CacheBytes = 0 })
	for i := range 5 {
		c := dial(t, ts.srv)
		c.compile(fmt.Sprintf("draw((0,0)--(%d,1));\n", i+1), map[string]any{"timeout": 3000})
		all := c.rest()
		if all[0].verb != "queue" || all[0].body["passed"] != true {
			t.Fatalf("task %d: first message %s %v, want queue passed (the only backend is free)", i, all[0].verb, all[0].body)
		}
		final(t, all)
	}
}

func TestShutdownLetsRunningTasksFinishThenAbortsTheRest(t *testing.T) {
	work := sandboxtest.WorkRoot(t)
	svc, err := New(Config{
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		DataPath:      filepath.Join(t.TempDir(), "usher.db"),
		LocalBackends: 2,
		Sandbox:       sandbox.Config{WorkRoot: work},
		// Long enough for the short task on a loaded machine (-race,
		// other tests): the long one spins for 30 s.
		ShutdownGrace: 8 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.ServeListener(ctx, ln) }()
	srv := &httptest.Server{URL: "http://" + ln.Addr().String()}

	short := dial(t, srv)
	short.compile("real x = 0; for (int i = 0; i < 3000000; ++i) x += i;\ndraw((0,0)--(1,1));\n", map[string]any{"timeout": 10000})
	short.until("queue")
	long := dial(t, srv)
	long.compile(spinForever, map[string]any{"timeout": 30000})
	long.until("queue")
	stop()
	if done := final(t, short.rest()); done.body["success"] != true {
		t.Fatalf("a task shorter than the grace period ended %v, want success", done.body)
	}
	if done := final(t, long.rest()); done.body["success"] != false || done.body["error"] != "server shutting down" {
		t.Fatalf("a task longer than the grace period ended %v, want aborted: server shutting down", done.body)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeListener: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop")
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Fatalf("%d work directories left after shutdown", len(entries))
	}
}

// dispatcher is the embedded default's dispatcher.
func (ts *testService) dispatcher() *asyqueue.Dispatcher { return ts.mode.(*embedded).d }
