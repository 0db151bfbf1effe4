package crashtest

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/testbin"
)

var (
	flagJobs   = flag.Int("crash.jobs", 10000, "jobs in the crash test")
	flagKills  = flag.Int("crash.kills", 5, "SIGKILLs of the server during the crash test")
	flagStalls = flag.Int("crash.stalls", 2, "times an agent freezes for longer than its lease")
	flagAgents = flag.Int("crash.agents", 6, "agents in the crash test (half of them offer the db capability)")
	flagSlots  = flag.Int("crash.slots", 4, "slots of each agent")
	flagSeed   = flag.Uint64("crash.seed", 0, "seed of the workload, the kill moments and the stalls (0: random)")
	flagRace   = flag.Bool("crash.serverrace", false, "build the server with the race detector (slower)")
	flagLog    = flag.String("crash.log", "", "file to write every process's whole log to when the test gives up waiting")
)

const (
	adminToken = "usher_crash-test-admin-token"
	agentLease = 2 * time.Second
)

// TestCrashRecovery works off a workload of jobs while killing the server
// with SIGKILL at random moments (and freezing agents past their lease),
// then checks that nothing was lost or done twice as far as the server is
// concerned, and that the executions it accepted kept the dependency
// order, the key limits, the groups and the read/write rule.
func TestCrashRecovery(t *testing.T) {
	crashRecovery(t, func(ctx context.Context, t *testing.T, bin string) deployment {
		srv := newServer(bin, filepath.Join(t.TempDir(), "usher.db"), adminToken, agentLease)
		t.Cleanup(srv.close)
		if err := srv.start(ctx); err != nil {
			t.Fatal(err)
		}
		return srv
	})
}

// deployment is what the crash test works against and disrupts: one
// `usher serve` on a SQLite file, or a multi-node deployment on Redis.
type deployment interface {
	// URL is the base URL of a server that is up, or "" while none is.
	URL() string
	// disrupt kills a part with SIGKILL and starts it again; it says what
	// it killed.
	disrupt(ctx context.Context, rng *rand.Rand) (string, error)
	// stop ends every part with SIGTERM and checks they exited cleanly.
	stop() error
	// logTail returns the last n bytes of what the parts logged.
	logTail(n int) string
	// reopen checks, in-process, the durable state a restart would
	// rebuild from: an idle, consistent engine holding every job done.
	reopen(t *testing.T, p *plan)
}

// crashRecovery is the crash test against the deployment start returns.
func crashRecovery(t *testing.T, start func(ctx context.Context, t *testing.T, bin string) deployment) {
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -args -crash.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	r := newRun(ctx, t, start)
	p := r.prepare(ctx, rng)
	r.disrupt(ctx, rng, len(p.jobs))
	r.waitFinished(ctx)
	worked := time.Since(r.epoch)
	execs := r.stopAgents()
	jobs := r.listJobs(ctx, p)
	r.checkStats(ctx)
	if err := r.dep.stop(); err != nil {
		t.Error(err)
	}
	lapses := r.checkLog()
	rep := check(p, jobs, execs, r.agents)
	for _, problem := range rep.problems {
		t.Error(problem)
	}
	r.dep.reopen(t, p)
	t.Logf("%d jobs in %s (build %s, whole test %s); %d kills (%s), %d agent stalls, %d leases lapsed; %d executions: %s; "+
		"retries seen (attempts beyond the first): %d; renewals answered 404: %d",
		len(p.jobs), worked.Round(time.Millisecond), r.buildTime.Round(time.Millisecond), time.Since(r.began).Round(time.Millisecond),
		r.kills, strings.Join(r.killed, ", "), r.stalls, lapses, len(execs), rep.outcomes, rep.retries, r.lostLeases())
}

// newRun builds the binary and starts the deployment.
func newRun(ctx context.Context, t *testing.T, start func(ctx context.Context, t *testing.T, bin string) deployment) *run {
	began := time.Now()
	bin := testbin.Usher(t, *flagRace)
	r := &run{t: t, hc: newHTTPClient(), began: began, buildTime: time.Since(began)}
	r.dep = start(ctx, t, bin)
	r.epoch = time.Now()
	r.admin = r.client(adminToken)
	return r
}

// run is the state of one crash test.
type run struct {
	t         *testing.T
	dep       deployment
	hc        *http.Client
	epoch     time.Time
	admin     *client
	agents    []*agent
	agentsWG  sync.WaitGroup
	agentCtx  context.Context // the agents run until it ends
	stop      context.CancelFunc
	progress  progress
	began     time.Time
	buildTime time.Duration
	kills     int
	killed    []string // what each kill hit
	stalls    int
}

func (r *run) client(token string) *client {
	return &client{hc: r.hc, base: r.dep.URL, token: token}
}

// prepare creates the queues, limits and tokens, starts the agents (so
// that some wait for work), and submits the workload.
func (r *run) prepare(ctx context.Context, rng *rand.Rand) *plan {
	t := r.t
	p, err := newPlan(rng, *flagJobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := setUp(ctx, r.admin); err != nil {
		t.Fatal(err)
	}
	agentSecret, err := newToken(ctx, r.admin, "crash agents", "agent")
	if err != nil {
		t.Fatal(err)
	}
	clientSecret, err := newToken(ctx, r.admin, "crash client", "client")
	if err != nil {
		t.Fatal(err)
	}
	r.startAgents(ctx, agentSecret)
	if err := p.submit(ctx, r.client(clientSecret)); err != nil {
		t.Fatal(err)
	}
	return p
}

func (r *run) startAgents(ctx context.Context, secret string) {
	actx, stop := context.WithCancel(ctx)
	r.agentCtx, r.stop = actx, stop
	r.t.Cleanup(func() { stop(); r.agentsWG.Wait() }) // before the server's cleanup: agents leave
	for i := range *flagAgents {
		var caps []string
		if i%2 == 0 {
			caps = []string{"db"}
		}
		a := newAgent(fmt.Sprintf("agent-%d", i), caps, *flagSlots, r.client(secret), r.epoch, r.progress.add)
		r.agents = append(r.agents, a)
		r.agentsWG.Add(1)
		go func() { defer r.agentsWG.Done(); a.run(actx, &r.agentsWG) }()
	}
}

// progress counts the completions the server accepted.
type progress struct {
	mu sync.Mutex
	n  int
}

func (p *progress) add() {
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
}

func (p *progress) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// agentError is the first unexpected answer an agent got, if any.
func (r *run) agentError() error {
	for _, a := range r.agents {
		if err := a.failed(); err != nil {
			return err
		}
	}
	return nil
}

// poll waits until cond holds, failing the test when an agent failed or
// ctx ended first.
func (r *run) poll(ctx context.Context, what string, every time.Duration, cond func() bool) {
	r.t.Helper()
	for !cond() {
		if err := r.agentError(); err != nil {
			r.t.Fatalf("waiting for %s: %v", what, err)
		}
		select {
		case <-ctx.Done():
			r.saveLog()
			r.t.Fatalf("waiting for %s: %v (%d completions accepted)\nserver log:\n%s", what, ctx.Err(), r.progress.count(), r.dep.logTail(4000))
		case <-time.After(every):
		}
	}
}

// saveLog writes the deployment's whole log to -crash.log, if given.
func (r *run) saveLog() {
	if *flagLog == "" {
		return
	}
	if err := os.WriteFile(*flagLog, []byte(r.dep.logTail(1<<30)), 0o644); err != nil {
		r.t.Logf("writing the log to %s: %v", *flagLog, err)
	}
}

// disruption is a kill of the server or a stall of an agent, once the
// agents' accepted completions reach at.
type disruption struct {
	at   int
	kill bool
}

// disrupt kills the server at random moments spread over the run (kill i
// at a random point of the i-th of equal slices of 5-90% of the jobs done,
// after a further random delay of 0-30 ms), restarting it on the same file
// each time; and freezes a random agent for two leases: the first time at
// a random point of 10-80% of the jobs done (kills may come meanwhile),
// the others between the last kill and 95% (so that the lease lapses on a
// server that stays up).
func (r *run) disrupt(ctx context.Context, rng *rand.Rand, jobs int) {
	var plan []disruption
	last := 0.0
	for i := range *flagKills {
		last = 0.05 + 0.85*(float64(i)+rng.Float64())/float64(*flagKills)
		plan = append(plan, disruption{at: int(last * float64(jobs)), kill: true})
	}
	for i := range *flagStalls {
		at := 0.1 + 0.7*rng.Float64()
		if i > 0 {
			at = last + (0.95-last)*rng.Float64()
		}
		plan = append(plan, disruption{at: int(at * float64(jobs))})
	}
	slices.SortFunc(plan, func(a, b disruption) int { return cmp.Compare(a.at, b.at) })
	for _, d := range plan {
		r.poll(ctx, fmt.Sprintf("%d completions", d.at), time.Millisecond, func() bool { return r.progress.count() >= d.at })
		if !d.kill {
			r.stalls++
			a := r.agents[rng.IntN(len(r.agents))]
			r.agentsWG.Add(1)
			go func() { defer r.agentsWG.Done(); a.freeze(r.agentCtx, 2*agentLease) }()
			continue
		}
		time.Sleep(time.Duration(rng.Int64N(int64(30 * time.Millisecond)))) // the test's input: when exactly the kill lands
		r.kills++
		what, err := r.dep.disrupt(ctx, rng)
		if err != nil {
			r.t.Fatalf("kill %d (%s): %v\nlog:\n%s", r.kills, what, err, r.dep.logTail(4000))
		}
		r.killed = append(r.killed, what)
	}
}
