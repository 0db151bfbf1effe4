package service

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/jobsrole"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/redisq/scheduler"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/internal/tokens"
	"github.com/usherhq/usher/jobtype"
)

// These tests run a queue server of multi-node mode (this package's
// Service with Config.Redis) on a real redis-server; the scheduler, when
// there is one, runs in-process as `usher scheduler` wires it (the
// scheduler role with the jobs role), and the test plays the backends with
// the commands a backend sends.

const redisAdmin = "usher_remotedash-test-admin-token"

// redisFront is a queue server in multi-node mode with its Redis.
type redisFront struct {
	*testService
	url  string
	rdb  redis.UniversalClient
	keys redisq.Keys
	logs *testbin.LogBuffer
}

func startRedisFront(t *testing.T) *redisFront {
	t.Helper()
	url := redistest.Start(t).URL()
	logs := &testbin.LogBuffer{}
	ts := startService(t, 0, func(c *Config) {
		c.Redis = RedisConfig{URL: url, Node: "front-1"}
		// Snapshots every 100 ms (read from Redis at most every 50 ms), so
		// that the tests wait less; what they check does not depend on it.
		c.dashEvery = 100 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	rdb, err := redisq.Open(t.Context(), url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	// The schedulers keep the tokens in Redis; the operator views check
	// the admin token there.
	if _, err := tokens.OpenRedis(rdb, redisq.DefaultPrefix, 0, nil).Add(t.Context(), redisAdmin, "test admin", tokens.Admin); err != nil {
		t.Fatal(err)
	}
	ts.admin = redisAdmin
	return &redisFront{testService: ts, url: url, rdb: rdb, keys: redisq.NewKeys(redisq.DefaultPrefix), logs: logs}
}

// startLeader runs a scheduler node with its jobs role, as `usher
// scheduler` does, until the returned crash is called (it keeps its lease
// until the lease lapses).
func (f *redisFront) startLeader(t *testing.T, node string) (crash func()) {
	t.Helper()
	return f.startLeaderAt(t, node, nil)
}

// startLeaderAt is startLeader with the scheduler's clock (time.Now when
// nil).
func (f *redisFront) startLeaderAt(t *testing.T, node string, now func() time.Time) (crash func()) {
	t.Helper()
	rdb, err := redisq.Open(t.Context(), f.url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("role", node)
	ctx, cancel := context.WithCancel(context.Background())
	role, err := jobsrole.New(ctx, jobsrole.Config{Client: rdb, Keys: f.keys, Listener: ln, Advertise: "http://" + ln.Addr().String(),
		AdminToken: redisAdmin, AdminTokenFile: filepath.Join(t.TempDir(), "token"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Config{Client: rdb, Node: node, Tiers: asyqueue.Tiers(0, 0), Logger: log,
		LeaseTTL: time.Second, RenewEvery: 100 * time.Millisecond, DashboardEvery: 100 * time.Millisecond,
		WhileLeading: role.WhileLeading, JobsStats: role.Stats, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { _ = role.Serve(ctx); done <- struct{}{} }()
	go func() { _ = s.Run(ctx); done <- struct{}{} }()
	crashed := false
	crash = func() {
		if !crashed {
			crashed = true
			cancel()
			testwait.Receive(t, 10*time.Second, done, "the jobs role stopped")
			testwait.Receive(t, 10*time.Second, done, "the scheduler stopped")
		}
	}
	t.Cleanup(crash)
	return crash
}

// addBackends registers n backends as `usher backend --redis` does and
// returns their IDs.
func (f *redisFront) addBackends(t *testing.T, n int) []string {
	t.Helper()
	ctx := t.Context()
	var ids []string
	for range n {
		id := strconv.FormatInt(f.rdb.Incr(ctx, f.keys.BackendCounter()).Val(), 10)
		pipe := f.rdb.TxPipeline()
		pipe.Set(ctx, f.keys.Backend(id), "", time.Minute)
		pipe.SAdd(ctx, f.keys.BackendSet(), id)
		pipe.RPush(ctx, f.keys.BackendUpdated(), id)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// createQueue makes a queue of generic jobs through the queue server,
// which passes /v1 to the leader (retrying while it has none yet).
func (f *redisFront) createQueue(t *testing.T, name string) {
	t.Helper()
	var status int
	var body []byte
	// 503 while the proxy has no leader yet (Retry-After: it finds the
	// leader within a second); any other answer ends the wait.
	testwait.Eventually(t, 10*time.Second, func() bool {
		req, _ := http.NewRequest("POST", f.srv.URL+"/v1/queues", strings.NewReader(`{"name":"`+name+`"}`))
		req.Header.Set("Authorization", "Bearer "+redisAdmin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
		return status != http.StatusServiceUnavailable
	}, "POST /v1/queues answered by the leader through the queue server")
	if status >= 300 {
		t.Fatalf("POST /v1/queues through the queue server: %d %s", status, body)
	}
}

func classes[T any](xs []T, class func(T) string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, class(x))
	}
	return out
}

func runningClasses(d dashboard.Dashboard) []string {
	return classes(d.Running, func(r dashboard.RunningTask) string { return r.Class })
}

// A queue server of multi-node mode streams the leading scheduler's state:
// tier limits from the live backends, the tasks its clients sent running
// and queued, the backends, the jobs of /v1 and the leading node; before a
// scheduler leads and after it died, it says that no scheduler leads.
func TestRedisDashboardShowsTheLeadersDeployment(t *testing.T) {
	f := startRedisFront(t)
	dash := openDashboard(t, f.testService)
	if doc, _, _ := dash.nextDoc(); doc.NoData != noLeaderText || doc.Leader != nil || len(doc.Queue) != 0 {
		t.Fatalf("before any scheduler: %+v", doc)
	}
	backends := f.addBackends(t, 2)
	crash := f.startLeader(t, "sched-a")
	doc := dash.untilDoc("the leader's state", func(d dashboard.Dashboard) bool { return d.Leader != nil && d.NoData == "" })
	if doc.Leader.Node != "sched-a" || !strings.HasSuffix(doc.Leader.Token, ":sched-a") {
		t.Fatalf("leader %+v", doc.Leader)
	}
	limits := classes(doc.Tiers, func(t dashboard.Tier) string { return t.Name + "=" + strconv.Itoa(t.Limit) })
	if !slices.Equal(limits, []string{"fast=2", "medium=1", "slow=1"}) {
		t.Fatalf("tier limits with 2 live backends: %v", limits)
	}

	for i, timeout := range []int{30000, 3000, 30000} {
		c := dial(t, f.srv)
		c.compile(quickFigure+"// "+strconv.Itoa(i)+"\n", map[string]any{"timeout": timeout})
		dash.untilDoc("task "+strconv.Itoa(i)+" on the dashboard", func(d dashboard.Dashboard) bool { return len(d.Running)+len(d.Queue) == i+1 })
	}
	doc = dash.untilDoc("a slow and a fast task running, a slow one queued", func(d dashboard.Dashboard) bool {
		return len(d.Running) == 2 && len(d.Queue) == 1
	})
	if got := runningClasses(doc); !slices.Equal(got, []string{"slow", "fast"}) {
		t.Fatalf("running %+v", doc.Running)
	}
	if q := doc.Queue[0]; q.Class != "slow" || q.Position != 0 || q.EstimateMS == nil {
		t.Fatalf("queued %+v", q)
	}
	slow := doc.Running[0].ID
	f.rdb.HSet(t.Context(), f.keys.Task(slow), redisq.FieldBackend, backends[1]) // the backend takes it
	doc = dash.untilDoc("the backend that took the slow task", func(d dashboard.Dashboard) bool {
		return len(d.Running) == 2 && d.Running[0].Backend == backends[1]
	})
	if !slices.Equal(doc.Backends, []dashboard.Backend{{ID: backends[0], State: "idle"}, {ID: backends[1], State: "busy"}}) {
		t.Fatalf("backends %+v", doc.Backends)
	}

	f.createQueue(t, "scan")
	dash.untilDoc("the leader's job queue", func(d dashboard.Dashboard) bool {
		return slices.ContainsFunc(d.Jobs.Queues, func(q jobtype.QueueStats) bool { return q.Name == "scan" })
	})

	crash()
	doc = dash.untilDoc("no scheduler leads", func(d dashboard.Dashboard) bool { return d.NoData != "" })
	if doc.NoData != noLeaderText || len(doc.Running) != 0 || len(doc.Queue) != 0 {
		t.Fatalf("after the leader died: %+v", doc)
	}
}

// Without a leader's document to show, the stream says why instead of
// showing an empty queue; a foreign or malformed value is skipped with one
// warning in the log, and the stream goes on.
func TestRedisDashboardWithoutALeadersDocument(t *testing.T) {
	f := startRedisFront(t)
	dash := openDashboard(t, f.testService)
	ctx := t.Context()
	valid := func(token string) string {
		_, node, _ := redisq.ParseToken(token)
		b, err := dashboard.Dashboard{State: dashboard.State{Time: time.Now(),
			Tiers: []dashboard.Tier{{Name: "fast", Limit: 9}}}, Leader: &dashboard.Leader{Node: node, Token: token}}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name   string
		set    func()
		noData string
		leader string
		warned string
	}{
		{"no lease", func() {}, noLeaderText, "", ""},
		{"lease, no document yet", func() { f.rdb.Set(ctx, f.keys.Leader(), "3:ghost", 0) }, notYetText, "ghost", ""},
		{"garbage", func() { f.rdb.Set(ctx, f.keys.Dashboard(), "garbage", 0) }, unreadableText, "ghost", "foreign or malformed value"},
		{"JSON of another kind", func() { f.rdb.Set(ctx, f.keys.Dashboard(), `{"tiers":[]}`, 0) }, unreadableText, "ghost", "it names no leader"},
		{"a hash", func() {
			f.rdb.Del(ctx, f.keys.Dashboard())
			f.rdb.HSet(ctx, f.keys.Dashboard(), "a", "b")
		}, unreadableText, "ghost", "cannot read scheduler.dashboard"},
		{"the last leader's document", func() {
			f.rdb.Del(ctx, f.keys.Dashboard())
			f.rdb.Set(ctx, f.keys.Dashboard(), valid("2:old"), 0)
		}, notYetText, "ghost", ""},
		{"the leader's document", func() { f.rdb.Set(ctx, f.keys.Dashboard(), valid("3:ghost"), 0) }, "", "ghost", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.set()
			doc := dash.untilDoc(tc.name, func(d dashboard.Dashboard) bool {
				return d.NoData == tc.noData && (d.Leader == nil) == (tc.leader == "")
			})
			if tc.leader != "" && doc.Leader.Node != tc.leader {
				t.Fatalf("leader %+v, want %s", doc.Leader, tc.leader)
			}
			if tc.noData == "" && (len(doc.Tiers) != 1 || doc.Tiers[0].Limit != 9) {
				t.Fatalf("the leader's document not shown: %+v", doc)
			}
			if tc.warned == "" {
				return
			}
			for range 2 { // more reads of the same value: logged once
				dash.nextDoc()
			}
			warnings := 0
			for _, line := range strings.Split(f.logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, tc.warned) {
					warnings++
				}
			}
			if warnings != 1 {
				t.Fatalf("%d warnings with %q in the log, want one:\n%s", warnings, tc.warned, f.logs.String())
			}
		})
	}
}

// In multi-node mode a queue server's /metrics leaves the generic jobs to
// the leading scheduler: its own engine is empty.
func TestRedisModeMetricsLeaveJobsToTheLeader(t *testing.T) {
	f := startRedisFront(t)
	resp := f.adminGet(t, t.Context(), "/metrics")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), "usher_jobs_") || !strings.Contains(string(body), "go_goroutines") {
		t.Fatalf("/metrics of a queue server in multi-node mode:\n%s", body)
	}
}

// A queue server of multi-node mode keeps no /v1 state of its own: the
// tokens live in Redis and the leader serves /v1, so it writes no admin
// token file (one the leader would refuse) and opens no jobs engine.
func TestRedisModeQueueServerWritesNoAdminToken(t *testing.T) {
	f := startRedisFront(t)
	dir := filepath.Dir(f.cfg.DataPath)
	if _, err := os.Stat(filepath.Join(dir, "usher-admin.token")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a queue server in multi-node mode wrote usher-admin.token beside its data (stat: %v)", err)
	}
	if f.logs.Contains("admin token") {
		t.Fatalf("a queue server in multi-node mode logged about an admin token:\n%s", f.logs.String())
	}
}

// Settings a queue server of multi-node mode would ignore are refused,
// naming where they belong.
func TestRedisModeRefusesSettingsItWouldIgnore(t *testing.T) {
	url := redistest.Start(t).URL()
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"local backends", func(c *Config) { c.LocalBackends = 1 }, "give no local or remote backends"},
		{"remote backend", func(c *Config) { c.RemoteBackends = []string{"ws://127.0.0.1:1"} }, "give no local or remote backends"},
		{"admin token", func(c *Config) { c.Jobs.AdminToken = redisAdmin }, "give --admin-token or --admin-token-file to usher scheduler"},
		{"admin token file", func(c *Config) { c.Jobs.AdminTokenFile = filepath.Join(t.TempDir(), "tok") }, "to usher scheduler"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Logger: slog.New(slog.DiscardHandler), DataPath: filepath.Join(t.TempDir(), "usher.db"),
				Redis: RedisConfig{URL: url, Node: "front-1"}}
			tc.mutate(&cfg)
			svc, err := New(cfg)
			if err == nil {
				svc.close()
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want an error saying %q", err, tc.want)
			}
		})
	}
}
