package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redisjobs"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/tokens"
)

// TestCrashRecoveryMultiNode is the crash test on multi-node mode: one
// Redis, two schedulers (one leads and serves /v1 from the Redis store)
// and two queue servers that pass /v1 to the leader; clients and agents
// spread their requests over both queue servers. The kills take turns:
// the leading scheduler, a queue server, and Redis itself, restarted from
// its append-only file (written before every answer, so that it keeps
// whatever it acknowledged).
func TestCrashRecoveryMultiNode(t *testing.T) {
	crashRecovery(t, func(ctx context.Context, t *testing.T, bin string) deployment {
		srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
		m := startMultiNode(ctx, t, bin, srv.URL())
		m.redis = srv
		return m
	})
}

// TestCrashRecoveryMultiNodeOnRedisCluster is the same on a 3-master
// Redis Cluster, every key under the {usher}: hash tag.
func TestCrashRecoveryMultiNodeOnRedisCluster(t *testing.T) {
	crashRecovery(t, func(ctx context.Context, t *testing.T, bin string) deployment {
		return startMultiNode(ctx, t, bin, redistest.StartCluster(t, 3).URL())
	})
}

// multiNode is a deployment of multi-node mode as processes.
type multiNode struct {
	t        *testing.T
	bin, dir string
	redisURL string
	rdb      redis.UniversalClient
	keys     redisq.Keys
	redis    *redistest.Server // restarted among the kills; nil: never

	mu     sync.Mutex
	scheds map[string]*testbin.Proc // by node name
	procs  []*testbin.Proc          // every process started, for the log
	fronts [2]frontSlot
	next   atomic.Uint64 // round robin over the queue servers
	starts int
	kills  int
}

// frontSlot is one queue server, restarted in place after a kill.
type frontSlot struct {
	proc *testbin.Proc
	url  atomic.Pointer[string] // "" while down
}

var servingRE = regexp.MustCompile(`msg="usher serving" addr=(\S+)`)

func startMultiNode(ctx context.Context, t *testing.T, bin, redisURL string) *multiNode {
	rdb, err := redisq.Open(ctx, redisURL, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	m := &multiNode{t: t, bin: bin, dir: t.TempDir(), redisURL: redisURL, rdb: rdb,
		keys: redisq.NewKeys(redisq.DefaultPrefix), scheds: map[string]*testbin.Proc{}}
	for i := range m.fronts {
		m.fronts[i].url.Store(new(string))
	}
	m.startScheduler()
	m.startScheduler()
	for i := range m.fronts {
		if err := m.startFront(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.waitLeaderAPI(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *multiNode) startScheduler() {
	m.mu.Lock()
	m.starts++
	name := fmt.Sprintf("sched-%d", m.starts)
	m.mu.Unlock()
	p := testbin.Start(m.t, name, m.bin, "scheduler", "--redis", m.redisURL, "--node", name,
		"--listen", "127.0.0.1:0", "--admin-token", adminToken, "--agent-lease", agentLease.String())
	m.mu.Lock()
	m.scheds[name] = p
	m.procs = append(m.procs, p)
	m.mu.Unlock()
}

func (m *multiNode) startFront(i int) error {
	m.mu.Lock()
	m.starts++
	name := fmt.Sprintf("front-%d.%d", i+1, m.starts)
	m.mu.Unlock()
	p := testbin.Start(m.t, name, m.bin, "serve", "--redis", m.redisURL, "--node", name, "--backends", "0",
		"--listen", "127.0.0.1:0", "--data", filepath.Join(m.dir, name+".db"), "--shutdown-grace", "10s")
	got, err := p.WaitFor(servingRE, time.Minute)
	if err != nil {
		return err
	}
	u := "http://" + got[1]
	m.mu.Lock()
	m.fronts[i].proc = p
	m.procs = append(m.procs, p)
	m.mu.Unlock()
	m.fronts[i].url.Store(&u)
	return nil
}

// waitLeaderAPI waits until a leader publishes its /v1 address.
func (m *multiNode) waitLeaderAPI(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for m.rdb.Exists(ctx, m.keys.SchedulerAPI()).Val() == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("no scheduler published its /v1 address: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond): // polling a condition in Redis
		}
	}
	return nil
}

// URL is a queue server that is up, taking turns.
func (m *multiNode) URL() string {
	n := m.next.Add(1)
	for i := range m.fronts {
		if u := *m.fronts[(int(n)+i)%len(m.fronts)].url.Load(); u != "" {
			return u
		}
	}
	return ""
}

// disrupt kills the leading scheduler and starts a new standby, kills a
// queue server and starts it again, or (when m.redis is set) restarts
// Redis, in turns.
func (m *multiNode) disrupt(ctx context.Context, rng *rand.Rand) (string, error) {
	m.kills++
	kinds := 2
	if m.redis != nil {
		kinds = 3
	}
	switch m.kills % kinds {
	case 1:
		return m.killLeader()
	case 0:
		if m.redis != nil {
			return "redis-server", m.redis.Restart()
		}
	}
	i := rng.IntN(len(m.fronts))
	m.fronts[i].url.Store(new(string))
	m.fronts[i].proc.Kill()
	return fmt.Sprintf("queue server %d", i+1), m.startFront(i)
}

func (m *multiNode) killLeader() (string, error) {
	tok := m.rdb.Get(context.Background(), m.keys.Leader()).Val()
	_, node, _ := strings.Cut(tok, ":")
	m.mu.Lock()
	p := m.scheds[node]
	delete(m.scheds, node)
	m.mu.Unlock()
	if p == nil {
		return "leader", fmt.Errorf("no scheduler process leads (token %q)", tok)
	}
	p.Kill()
	m.startScheduler()
	return "leading scheduler " + node, nil
}

// stop ends every running process with SIGTERM.
func (m *multiNode) stop() error {
	var errs []string
	for i := range m.fronts {
		m.fronts[i].url.Store(new(string))
		if err := m.fronts[i].proc.Stop(30 * time.Second); err != nil {
			errs = append(errs, err.Error())
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.scheds {
		if err := p.Stop(30 * time.Second); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stopping: %s", strings.Join(errs, "; "))
	}
	return nil
}

// logTail returns the last n bytes of every process's output, each line
// prefixed with its process.
func (m *multiNode) logTail(n int) string {
	m.mu.Lock()
	procs := append([]*testbin.Proc(nil), m.procs...)
	m.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		for _, l := range p.Output() {
			b.WriteString("[" + p.Name + "] " + l + "\n")
		}
	}
	s := b.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// reopen rebuilds an engine in-process from the Redis store, as a new
// leader would, and checks it.
func (m *multiNode) reopen(t *testing.T, p *plan) {
	t.Helper()
	store := redisjobs.New(m.rdb, m.keys.Prefix(), redisjobs.Fence{}, nil)
	toks := tokens.OpenRedis(m.rdb, m.keys.Prefix(), 0, nil)
	checkReopened(t, jobsapitest.StartOn(t, store, toks, jobsapitest.Options{}), p)
}
