package e2etest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
)

func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }

// deployment is one multi-node deployment on one Redis.
type deployment struct {
	t        testing.TB
	bin      string
	redisURL string
	rdb      redis.UniversalClient
	keys     redisq.Keys
	work     string // the backends' work root
	dir      string

	mu       sync.Mutex
	fronts   map[string]*front
	scheds   map[string]*testbin.Proc
	backends map[string]*testbin.Proc // by backend ID
}

// front is a running queue server.
type front struct {
	*testbin.Proc
	base string // http://127.0.0.1:port
}

// asyURL is the queue server's /asy.
func (f *front) asyURL() string { return "ws" + strings.TrimPrefix(f.base, "http") + "/asy" }

func newDeployment(t testing.TB, redisURL string) *deployment {
	t.Helper()
	ctx := context.Background()
	rdb, err := redisq.Open(ctx, redisURL, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return &deployment{
		t: t, bin: testbin.Usher(t, false), redisURL: redisURL, rdb: rdb,
		keys: redisq.NewKeys(redisq.DefaultPrefix), work: sandboxtest.WorkRoot(t), dir: t.TempDir(),
		fronts: map[string]*front{}, scheds: map[string]*testbin.Proc{}, backends: map[string]*testbin.Proc{},
	}
}

func newSingleRedis(t *testing.T) *deployment {
	return newDeployment(t, redistest.Start(t).URL())
}

var (
	servingRE   = regexp.MustCompile(`msg="usher serving" addr=(\S+)`)
	listeningRE = regexp.MustCompile(`listening.* addr=(\S+).* redis_backend=(\S+)`)
)

const startBound = 60 * time.Second

// adminToken is the /v1 admin token every scheduler of a test knows.
const adminToken = "usher_e2e-test-admin-token"

// startFront starts a queue server; extra flags override the defaults
// (the result cache is off unless extra turns it on).
func (d *deployment) startFront(name string, extra ...string) *front {
	d.t.Helper()
	args := append([]string{"serve", "--redis", d.redisURL, "--node", name,
		"--listen", "127.0.0.1:0", "--data", filepath.Join(d.dir, name+".db"), "--cache-bytes", "0",
		"--max-queued-per-client", "1000", "--log-level", "debug"}, extra...)
	p := testbin.Start(d.t, name, d.bin, args...)
	m, err := p.WaitFor(servingRE, startBound)
	if err != nil {
		d.t.Fatal(err)
	}
	f := &front{Proc: p, base: "http://" + m[1]}
	d.mu.Lock()
	d.fronts[name] = f
	d.mu.Unlock()
	return f
}

func (d *deployment) startScheduler(name string, extra ...string) *testbin.Proc {
	d.t.Helper()
	args := append([]string{"scheduler", "--redis", d.redisURL, "--node", name, "--log-level", "debug",
		"--listen", "127.0.0.1:0", "--admin-token", adminToken}, extra...)
	p := testbin.Start(d.t, name, d.bin, args...)
	d.mu.Lock()
	d.scheds[name] = p
	d.mu.Unlock()
	return p
}

func (d *deployment) startBackend(name string, extra ...string) *testbin.Proc {
	d.t.Helper()
	return d.startBackends([]string{name}, extra...)[0]
}

// startBackends starts a backend of each name at once, so that their
// start-up checks of the sandbox overlap, and waits until every one
// listens; extra are flags for each.
func (d *deployment) startBackends(names []string, extra ...string) []*testbin.Proc {
	d.t.Helper()
	args := append([]string{"backend", "--redis", d.redisURL, "--listen", "127.0.0.1:0",
		"--work-root", d.work, "--log-level", "debug"}, extra...)
	procs := make([]*testbin.Proc, len(names))
	for i, name := range names {
		procs[i] = testbin.Start(d.t, name, d.bin, args...)
	}
	for _, p := range procs {
		m, err := p.WaitFor(listeningRE, startBound)
		if err != nil {
			d.t.Fatal(err)
		}
		d.mu.Lock()
		d.backends[m[2]] = p // by the ID it registered with
		d.mu.Unlock()
	}
	return procs
}

// backendNames are n backends' names: backend-1, backend-2, ….
func backendNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "backend-" + strconv.Itoa(i+1)
	}
	return names
}

// startTwoOfEach starts two schedulers, two backends and two queue
// servers, and waits until one scheduler leads and both backends are
// registered; it returns the queue servers.
func (d *deployment) startTwoOfEach() []*front {
	d.t.Helper()
	d.startScheduler("sched-1")
	d.startScheduler("sched-2")
	d.startBackends(backendNames(2))
	fronts := []*front{d.startFront("front-1"), d.startFront("front-2")}
	d.waitLeader(10*time.Second, "")
	d.waitBackends(2)
	return fronts
}

// eventually polls cond until it holds, failing after bound.
func (d *deployment) eventually(bound time.Duration, what string, cond func() (bool, string)) {
	d.t.Helper()
	var state string
	holds := func() bool {
		var ok bool
		ok, state = cond()
		return ok
	}
	if err := testwait.Until(bound, holds, "%s", what); err != nil {
		d.t.Fatalf("%v (%s)", err, state)
	}
}

// leader returns the node leading now ("" when none).
func (d *deployment) leader() string {
	tok, err := d.rdb.Get(context.Background(), d.keys.Leader()).Result()
	if err != nil {
		return ""
	}
	_, node, _ := strings.Cut(tok, ":")
	return node
}

func (d *deployment) waitLeader(bound time.Duration, not string) string {
	d.t.Helper()
	var got string
	d.eventually(bound, "a scheduler leads", func() (bool, string) {
		got = d.leader()
		return got != "" && got != not, "leader " + got
	})
	return got
}

func (d *deployment) waitBackends(n int) {
	d.t.Helper()
	d.eventually(30*time.Second, fmt.Sprintf("%d backends registered", n), func() (bool, string) {
		got := d.rdb.SCard(context.Background(), d.keys.BackendSet()).Val()
		return got == int64(n), fmt.Sprintf("backend.set has %d", got)
	})
}

// leftovers lists what a finished workload must not leave in Redis: task
// keys and entries of the queue's lists, sets and stream.
func (d *deployment) leftovers() []string {
	ctx := context.Background()
	var out []string
	taskKeys := d.taskKeys()
	if len(taskKeys) > 0 {
		out = append(out, fmt.Sprintf("%d task keys, e.g. %s", len(taskKeys), taskKeys[0]))
	}
	counts := map[string]int64{
		"queue":            d.rdb.ZCard(ctx, d.keys.Queue()).Val(),
		"queue.incoming":   d.rdb.LLen(ctx, d.keys.Incoming()).Val(),
		"queue.processing": d.rdb.SCard(ctx, d.keys.Processing()).Val(),
		"queue.executing":  d.rdb.HLen(ctx, d.keys.Executing()).Val(),
		"queue.outcoming":  d.rdb.XLen(ctx, d.keys.Outcoming()).Val(),
		"queue.finished":   d.rdb.LLen(ctx, d.keys.Finished()).Val(),
	}
	for k, n := range counts {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s has %d", k, n))
		}
	}
	return out
}

// taskKeys lists the task keys in Redis, on every master of a Cluster.
func (d *deployment) taskKeys() []string {
	ctx := context.Background()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, d.keys.Prefix()+"task:*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	if cc, ok := d.rdb.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		_ = scan(ctx, d.rdb)
	}
	return keys
}
