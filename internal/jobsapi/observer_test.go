package jobsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/sqlitejobs"
	"github.com/usherhq/usher/internal/testclock"
	"github.com/usherhq/usher/jobtype"
)

// metricsEngine is the real engine on a SQLite file, with a test clock,
// its Observer and its Collector registered in a registry of their own.
type metricsEngine struct {
	t   *testing.T
	e   *jobs.Engine
	clk *testclock.Clock
	reg *prometheus.Registry
}

func openMetricsEngine(t *testing.T) *metricsEngine {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, filepath.Join(t.TempDir(), "usher.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := sqlitejobs.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := testclock.New(time.UnixMilli(1800000000000))
	obs := jobsapi.NewObserver()
	e, err := jobs.Open(ctx, jobs.Config{Store: store, Now: clk.Now, LeaseTTL: time.Hour, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs, jobsapi.NewCollector(e))
	return &metricsEngine{t: t, e: e, clk: clk, reg: reg}
}

func (m *metricsEngine) queue(q jobtype.Queue) {
	m.t.Helper()
	if _, err := m.e.CreateQueue(context.Background(), q); err != nil {
		m.t.Fatal(err)
	}
}

func (m *metricsEngine) enqueue(specs ...jobtype.JobSpec) []string {
	m.t.Helper()
	ids, err := m.e.Enqueue(context.Background(), specs)
	if err != nil {
		m.t.Fatal(err)
	}
	return ids
}

// advance moves the clock and applies the passage of time.
func (m *metricsEngine) advance(d time.Duration) {
	m.t.Helper()
	m.clk.Advance(d)
	if err := m.e.Tick(context.Background()); err != nil {
		m.t.Fatal(err)
	}
}

// lease takes up to n jobs and checks which it got, by id.
func (m *metricsEngine) lease(n int, want ...string) []jobtype.LeasedJob {
	m.t.Helper()
	ans, err := m.e.Lease(context.Background(), jobtype.LeaseRequest{Agent: "agent", Slots: 100, Max: n})
	if err != nil {
		m.t.Fatal(err)
	}
	var got []string
	for _, j := range ans.Jobs {
		got = append(got, j.ID)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		m.t.Fatalf("leased %v; want %v", got, want)
	}
	return ans.Jobs
}

func (m *metricsEngine) complete(rs ...jobtype.Result) {
	m.t.Helper()
	acks, err := m.e.Complete(context.Background(), "agent", rs)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, a := range acks {
		if a.Ignored {
			m.t.Fatalf("result of job %s ignored", a.ID)
		}
	}
}

// histogram reads the count and sum of a histogram's series for queue.
func (m *metricsEngine) histogram(name, queue string) (uint64, float64) {
	m.t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		m.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if label(s, "queue") == queue {
				return s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

// gauge reads a series of a gauge family by one label; ok is false when
// the series is not exported.
func (m *metricsEngine) gauge(name, labelName, value string) (float64, bool) {
	m.t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		m.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if label(s, labelName) == value {
				return s.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func near(got, want float64) bool { return math.Abs(got-want) < 1e-6 }

// The histograms measure what a user asks ("how long did my jobs wait,
// how long did they run") on the engine's clock: a job waits from its
// enqueue, a scheduled job from its due time (not its enqueue), a retry
// from the end of its backoff and a snoozed job from the end of its
// snooze; each ended attempt counts its run time, and each outcome is
// counted by queue.
func TestObserverHistogramsAndOutcomesPerQueue(t *testing.T) {
	m := openMetricsEngine(t)
	m.queue(jobtype.Queue{Name: "a", Active: true, Retry: jobtype.RetryPolicy{MaxAttempts: 2,
		Backoff: &jobtype.Backoff{Policy: jobtype.BackoffConstant, BaseMs: 10000}}})
	m.queue(jobtype.Queue{Name: "b", Active: true})
	m.queue(jobtype.Queue{Name: "paused"})
	t0 := m.clk.Now()
	due := t0.Add(2 * time.Second)
	ids := m.enqueue(jobtype.JobSpec{Queue: "a"}, jobtype.JobSpec{Queue: "a", RunAt: &due})
	plain, scheduled := ids[0], ids[1]
	m.advance(3 * time.Second)
	first := m.lease(10, plain, scheduled) // waits: 3 s, and 1 s past the due time
	if n, sum := m.histogram("usher_jobs_queue_wait_seconds", "a"); n != 2 || !near(sum, 4) {
		t.Fatalf("queue wait of a: %d observations summing to %gs; want 2 summing to 4s (3s + 1s after its due time)", n, sum)
	}
	m.advance(5 * time.Second)
	m.complete(jobtype.Result{ID: plain, Attempt: first[0].Attempt},
		jobtype.Result{ID: scheduled, Attempt: first[1].Attempt, ExitCode: 1}) // retried after 10 s
	m.advance(12 * time.Second)
	second := m.lease(10, scheduled) // waited 2 s past its backoff
	m.advance(time.Second)
	m.complete(jobtype.Result{ID: scheduled, Attempt: second[0].Attempt, SnoozeMs: 4000})
	m.advance(5 * time.Second)
	third := m.lease(10, scheduled) // waited 1 s past its snooze
	m.advance(7 * time.Second)
	m.complete(jobtype.Result{ID: scheduled, Attempt: third[0].Attempt, ExitCode: 2}) // its last attempt: failed

	if n, sum := m.histogram("usher_jobs_queue_wait_seconds", "a"); n != 4 || !near(sum, 3+1+2+1) {
		t.Fatalf("queue wait of a: %d observations summing to %gs; want 4 summing to 7s", n, sum)
	}
	if n, sum := m.histogram("usher_jobs_run_seconds", "a"); n != 4 || !near(sum, 5+5+1+7) {
		t.Fatalf("run time of a: %d observations summing to %gs; want 4 summing to 18s", n, sum)
	}

	// queue b: one cancelled while queued, one cancelled while running;
	// queue paused: one discarded at its deadline.
	deadline := m.clk.Now().Add(time.Second)
	ids = m.enqueue(jobtype.JobSpec{Queue: "b"}, jobtype.JobSpec{Queue: "b"}, jobtype.JobSpec{Queue: "paused", Deadline: &deadline})
	m.lease(1, ids[0])
	m.advance(2 * time.Second) // discards ids[2]
	for _, id := range ids[:2] {
		if _, err := m.e.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if n, sum := m.histogram("usher_jobs_run_seconds", "b"); n != 1 || !near(sum, 2) {
		t.Fatalf("run time of b: %d observations summing to %gs; want the cancelled running attempt's 2s", n, sum)
	}

	want := map[string]map[jobs.Outcome]float64{
		"a":      {jobs.OutcomeSucceeded: 1, jobs.OutcomeRetried: 1, jobs.OutcomeSnoozed: 1, jobs.OutcomeFailed: 1},
		"b":      {jobs.OutcomeCancelled: 2},
		"paused": {jobs.OutcomeDiscarded: 1},
	}
	var expected strings.Builder
	expected.WriteString("# HELP usher_jobs_outcomes_total How generic jobs' attempts and unstarted jobs ended, by queue and outcome.\n# TYPE usher_jobs_outcomes_total counter\n")
	for _, q := range []string{"a", "b", "paused"} {
		for o := range jobs.NumOutcomes {
			fmt.Fprintf(&expected, "usher_jobs_outcomes_total{outcome=%q,queue=%q} %g\n", o, q, want[q][o])
		}
	}
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(expected.String()), "usher_jobs_outcomes_total"); err != nil {
		t.Fatal(err)
	}

	st := m.e.Stats().Counters
	if st.Snoozed != 1 || st.Expired != 1 || st.TimedOut != 0 {
		t.Fatalf("/v1/stats counters: snoozed %d, expired %d, timedOut %d; want 1, 1, 0", st.Snoozed, st.Expired, st.TimedOut)
	}
}

// An attempt the server ends past its time limit and grace counts as
// failed (no retries left), with its run time up to that end, and in
// /v1/stats as timedOut.
func TestObserverCountsTimeLimitEnding(t *testing.T) {
	m := openMetricsEngine(t)
	m.queue(jobtype.Queue{Name: "t", Active: true})
	id := m.enqueue(jobtype.JobSpec{Queue: "t", TimeoutMs: 1000})[0]
	m.lease(1, id)
	m.advance(10 * time.Second) // past 1 s and the 5 s grace
	if n, sum := m.histogram("usher_jobs_run_seconds", "t"); n != 1 || !near(sum, 10) {
		t.Fatalf("run time of t: %d observations summing to %gs; want 1 of 10s", n, sum)
	}
	if got := m.outcomes("t", "failed"); got != 1 {
		t.Fatalf("failed outcomes of t: %g; want 1", got)
	}
	if st := m.e.Stats().Counters; st.TimedOut != 1 || st.Failed != 1 {
		t.Fatalf("/v1/stats counters: timedOut %d, failed %d; want 1, 1", st.TimedOut, st.Failed)
	}
}

// outcomes reads the outcome counter of a queue.
func (m *metricsEngine) outcomes(queue, outcome string) float64 {
	m.t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		m.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "usher_jobs_outcomes_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			if label(s, "queue") == queue && label(s, "outcome") == outcome {
				return s.GetCounter().GetValue()
			}
		}
	}
	m.t.Fatalf("no usher_jobs_outcomes_total{queue=%q,outcome=%q}", queue, outcome)
	return 0
}

// A job of a workflow waits from when its dependency is done, not from
// its enqueue.
func TestObserverWaitOfDependantCountsFromItsDependency(t *testing.T) {
	m := openMetricsEngine(t)
	m.queue(jobtype.Queue{Name: "w", Active: true})
	_, byName, err := m.e.SubmitWorkflow(context.Background(), jobtype.WorkflowSpec{Jobs: []jobtype.WorkflowJob{
		{Name: "first", JobSpec: jobtype.JobSpec{Queue: "w"}},
		{Name: "then", JobSpec: jobtype.JobSpec{Queue: "w", After: []string{"first"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	m.advance(time.Second)
	first := m.lease(10, byName["first"])
	m.advance(30 * time.Second)
	m.complete(jobtype.Result{ID: first[0].ID, Attempt: first[0].Attempt})
	m.advance(2 * time.Second)
	m.lease(10, byName["then"])
	if n, sum := m.histogram("usher_jobs_queue_wait_seconds", "w"); n != 2 || !near(sum, 1+2) {
		t.Fatalf("queue wait of w: %d observations summing to %gs; want 2 summing to 3s (1s, and 2s after its dependency)", n, sum)
	}
}

// A key with a limit shows its running holders against the limit, its
// queued jobs, and a rated key its tokens.
func TestKeyGaugesShowUseAgainstLimit(t *testing.T) {
	m := openMetricsEngine(t)
	m.queue(jobtype.Queue{Name: "k", Active: true})
	ctx := context.Background()
	if _, err := m.e.SetKeyLimit(ctx, jobtype.KeyLimit{Pattern: "host:*", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.e.SetKeyLimit(ctx, jobtype.KeyLimit{Pattern: "api", Rate: "10/h", Burst: 3}); err != nil {
		t.Fatal(err)
	}
	host := func() jobtype.JobSpec { return jobtype.JobSpec{Queue: "k", Keys: []string{"host:x"}} }
	ids := m.enqueue(host(), host(), host(), jobtype.JobSpec{Queue: "k", Keys: []string{"api"}}, jobtype.JobSpec{Queue: "k", Keys: []string{"free"}})
	m.lease(10, ids[0], ids[1], ids[3], ids[4])
	for _, c := range []struct {
		name, key string
		want      float64
	}{
		{"usher_jobs_key_running", "host:x", 2},
		{"usher_jobs_key_limit", "host:x", 2},
		{"usher_jobs_key_queued", "host:x", 1},
		{"usher_jobs_key_running", "api", 1},
		{"usher_jobs_key_limit", "api", 0},
		{"usher_jobs_key_tokens", "api", 2},
	} {
		if got, ok := m.gauge(c.name, "key", c.key); !ok || got != c.want {
			t.Errorf("%s{key=%q} = %g (exported: %v); want %g", c.name, c.key, got, ok, c.want)
		}
	}
	if _, ok := m.gauge("usher_jobs_key_running", "key", "free"); ok {
		t.Error("a key with neither limit nor rate is exported")
	}
	if _, ok := m.gauge("usher_jobs_key_tokens", "key", "host:x"); ok {
		t.Error("a key without a rate exports tokens")
	}
}

// However many limited keys are in use, at most MaxKeySeries of them are
// exported one by one (the busiest) and the rest summed under "other":
// the totals stay whole.
func TestKeyGaugesAreCapped(t *testing.T) {
	m := openMetricsEngine(t)
	m.queue(jobtype.Queue{Name: "k", Active: true})
	ctx := context.Background()
	if _, err := m.e.SetKeyLimit(ctx, jobtype.KeyLimit{Pattern: "host:*", Limit: 3}); err != nil {
		t.Fatal(err)
	}
	const keys = 500
	var specs []jobtype.JobSpec
	for i := range keys {
		specs = append(specs, jobtype.JobSpec{Queue: "k", Keys: []string{fmt.Sprintf("host:%03d", i)}})
	}
	// host:000 gets the most running (3), host:001 two; "other" is a
	// key's name too, and is summed with the rest.
	specs = append(specs, jobtype.JobSpec{Queue: "k", Keys: []string{"host:000"}}, jobtype.JobSpec{Queue: "k", Keys: []string{"host:000"}},
		jobtype.JobSpec{Queue: "k", Keys: []string{"host:001"}})
	if _, err := m.e.SetKeyLimit(ctx, jobtype.KeyLimit{Pattern: "other", Limit: 5}); err != nil {
		t.Fatal(err)
	}
	specs = append(specs, jobtype.JobSpec{Queue: "k", Keys: []string{"other"}})
	m.enqueue(specs...)
	ans, err := m.e.Lease(ctx, jobtype.LeaseRequest{Agent: "agent", Slots: 1000})
	if err != nil || len(ans.Jobs) != len(specs) {
		t.Fatalf("leased %d of %d jobs (%v)", len(ans.Jobs), len(specs), err)
	}
	if n := testutil.CollectAndCount(jobsapi.NewCollector(m.e), "usher_jobs_key_running"); n != jobsapi.MaxKeySeries+1 {
		t.Fatalf("usher_jobs_key_running has %d series with %d limited keys; want %d", n, keys+1, jobsapi.MaxKeySeries+1)
	}
	if got, _ := m.gauge("usher_jobs_limited_keys", "", ""); got != keys+1 {
		t.Fatalf("usher_jobs_limited_keys = %g; want %d", got, keys+1)
	}
	if got, ok := m.gauge("usher_jobs_key_running", "key", "host:000"); !ok || got != 3 {
		t.Fatalf("the busiest key host:000: %g (exported: %v); want 3", got, ok)
	}
	if got, ok := m.gauge("usher_jobs_key_running", "key", "host:001"); !ok || got != 2 {
		t.Fatalf("the next busiest key host:001: %g (exported: %v); want 2", got, ok)
	}
	var running, limit float64
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "usher_jobs_key_running":
				running += s.GetGauge().GetValue()
			case "usher_jobs_key_limit":
				limit += s.GetGauge().GetValue()
			}
		}
	}
	if running != float64(len(specs)) || limit != 3*keys+5 {
		t.Fatalf("exported keys sum to %g running, limit %g; want %d, %d", running, limit, len(specs), 3*keys+5)
	}
	other, _ := m.gauge("usher_jobs_key_running", "key", "other")
	if want := float64(len(specs)-3-2) - float64(jobsapi.MaxKeySeries-2); other != want {
		t.Fatalf(`key="other" sums %g running; want %g`, other, want)
	}
}

// The Grafana dashboard in docs reads only metrics that the Observer and
// the Collector export, and its expressions' brackets balance.
func TestGrafanaDashboardReadsExportedMetrics(t *testing.T) {
	data, err := os.ReadFile("../../docs/grafana-jobs.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("docs/grafana-jobs.json: %v", err)
	}
	m := openMetricsEngine(t)
	m.queue(jobtype.Queue{Name: "q", Active: true})
	if _, err := m.e.SetKeyLimit(context.Background(), jobtype.KeyLimit{Pattern: "k", Limit: 1, Rate: "1/s"}); err != nil {
		t.Fatal(err)
	}
	id := m.enqueue(jobtype.JobSpec{Queue: "q", Keys: []string{"k"}})[0]
	m.lease(1, id)
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range fams {
		exported[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+suffix] = true
			}
		}
	}
	name := regexp.MustCompile(`usher_[a-z_]+`)
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			for _, n := range name.FindAllString(tg.Expr, -1) {
				if !exported[n] {
					t.Errorf("panel %q reads %s, which is not exported", p.Title, n)
				}
			}
			for _, pair := range []string{"()", "{}", "[]"} {
				if strings.Count(tg.Expr, pair[:1]) != strings.Count(tg.Expr, pair[1:]) {
					t.Errorf("panel %q: unbalanced %s in %s", p.Title, pair, tg.Expr)
				}
			}
		}
	}
	if exprs < 10 {
		t.Fatalf("the dashboard has %d expressions", exprs)
	}
}
