package crashtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
)

// stats is the part of GET /v1/stats the test reads.
type stats struct {
	Queues []queueStats `json:"queues"`
	Keys   []gateStats  `json:"keys"`
	Groups []gateStats  `json:"groups"`
	Tiers  []struct {
		Name    string `json:"name"`
		Running int    `json:"running"`
		Counted int    `json:"counted"`
	} `json:"tiers"`
	Agents []struct {
		ID      string `json:"id"`
		Running int    `json:"running"`
	} `json:"agents"`
}

type queueStats struct {
	Name    string `json:"name"`
	Queued  int    `json:"queued"`
	Running int    `json:"running"`
	Waiting int    `json:"waiting"`
	Delayed int    `json:"delayed"`
	Blocked int    `json:"blocked"`
}

type gateStats struct {
	Key     string `json:"key"`
	Running int    `json:"running"`
	Queued  int    `json:"queued"`
}

func (st *stats) unfinished() int {
	n := 0
	for _, q := range st.Queues {
		n += q.Queued + q.Running + q.Waiting + q.Delayed
	}
	return n
}

// waitFinished waits until the server has no unfinished job left.
func (r *run) waitFinished(ctx context.Context) {
	var st stats
	defer func() {
		if r.t.Failed() {
			r.t.Logf("last stats: %+v", st)
			r.describeRunning(ctx)
		}
	}()
	r.poll(ctx, "every job to finish", 50*time.Millisecond, func() bool {
		st = stats{}
		err := r.admin.must(ctx, "GET", "/v1/stats", nil, &st, 200)
		if err != nil && ctx.Err() == nil {
			r.t.Fatal(err)
		}
		return err == nil && st.unfinished() == 0
	})
}

// describeRunning logs, for a test that gave up waiting, every job the
// server says is running and what the agents recorded of it.
func (r *run) describeRunning(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, a := range r.agents {
		a.mu.Lock()
		r.t.Logf("agent %s runs %d jobs by its own count (%d lease answers, %d lost)", a.name, a.running, a.leases, a.lost)
		a.mu.Unlock()
	}
	jobs, err := listAll(ctx, r.admin)
	if err != nil {
		r.t.Logf("listing the jobs: %v", err)
		return
	}
	for _, j := range jobs {
		if j.State != "running" {
			continue
		}
		var seen []string
		for _, a := range r.agents {
			a.mu.Lock()
			for _, x := range a.execs {
				if x.job == j.ID {
					seen = append(seen, fmt.Sprintf("%s attempt %d %s at %v", x.agent, x.attempt, x.outcome, x.end))
				}
			}
			a.mu.Unlock()
		}
		r.t.Logf("still running: job %s attempt %d on %s; the agents recorded: %v", j.ID, j.Attempt, j.Agent, seen)
	}
}

// stopAgents stops the agents and returns every execution they recorded.
func (r *run) stopAgents() []execution {
	r.stop()
	r.agentsWG.Wait()
	var all []execution
	for _, a := range r.agents {
		if a.err != nil {
			r.t.Error(a.err)
		}
		if len(a.stops) > 0 {
			r.t.Errorf("agent %s was told to stop or shorten jobs that nobody cancelled or downgraded: %v", a.name, a.stops)
		}
		all = append(all, a.execs...)
	}
	return all
}

func (r *run) lostLeases() int {
	n := 0
	for _, a := range r.agents {
		n += a.lost
	}
	return n
}

// checkStats checks that the server shows nothing queued or running, and
// no key, group, tier or agent holding a running job.
func (r *run) checkStats(ctx context.Context) {
	var st stats
	if err := r.admin.must(ctx, "GET", "/v1/stats", nil, &st, 200); err != nil {
		r.t.Fatal(err)
	}
	for _, q := range st.Queues {
		if q.Queued+q.Running+q.Waiting+q.Delayed+q.Blocked != 0 {
			r.t.Errorf("stats: queue %s: %+v; want nothing left", q.Name, q)
		}
	}
	for _, g := range append(st.Keys, st.Groups...) {
		if g.Running != 0 || g.Queued != 0 {
			r.t.Errorf("stats: key or group %s: %d running, %d queued; want 0", g.Key, g.Running, g.Queued)
		}
	}
	for _, tr := range st.Tiers {
		if tr.Running != 0 || tr.Counted != 0 {
			r.t.Errorf("stats: tier %s: %d running, %d counted; want 0", tr.Name, tr.Running, tr.Counted)
		}
	}
	for _, a := range st.Agents {
		if a.Running != 0 {
			r.t.Errorf("stats: agent %s runs %d jobs; want 0", a.ID, a.Running)
		}
	}
}

// checkLog fails the test on an error or a data race the server logged,
// and counts the agent leases that lapsed.
func (r *run) checkLog() (lapses int) {
	for _, line := range strings.Split(r.dep.logTail(1<<30), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "DATA RACE") {
			r.t.Errorf("server log: %s", line)
		}
		if strings.Contains(line, "agent lease lapsed") {
			lapses++
		}
	}
	return lapses
}

// apiJob is a job as GET /v1/jobs returns it.
type apiJob struct {
	ID       string   `json:"id"`
	Queue    string   `json:"queue"`
	State    string   `json:"state"`
	Payload  payload  `json:"payload"`
	Keys     []string `json:"keys"`
	Group    string   `json:"group"`
	Mode     string   `json:"mode"`
	Workflow string   `json:"workflow"`
	Attempt  int      `json:"attempt"`
	Agent    string   `json:"agent"`
}

// listJobs reads every job, page by page, and checks the workflows' state.
func (r *run) listJobs(ctx context.Context, p *plan) map[string]apiJob {
	jobs, err := listAll(ctx, r.admin)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, wf := range p.workflows {
		var ans struct {
			State string `json:"state"`
		}
		if err := r.admin.must(ctx, "GET", "/v1/workflows/"+wf.id, nil, &ans, 200); err != nil {
			r.t.Fatal(err)
		}
		if ans.State != "succeeded" {
			r.t.Errorf("workflow %s (%s): state %q; want succeeded", wf.id, wf.spec.Name, ans.State)
		}
	}
	return jobs
}

func listAll(ctx context.Context, c *client) (map[string]apiJob, error) {
	jobs := map[string]apiJob{}
	for after := "0"; after != ""; {
		var page struct {
			Jobs []apiJob `json:"jobs"`
			Next string   `json:"next"`
		}
		if err := c.must(ctx, "GET", "/v1/jobs?limit=1000&after="+after, nil, &page, 200); err != nil {
			return nil, fmt.Errorf("listing jobs: %w", err)
		}
		for _, j := range page.Jobs {
			if _, dup := jobs[j.ID]; dup {
				return nil, fmt.Errorf("listing jobs: job %s listed twice", j.ID)
			}
			jobs[j.ID] = j
		}
		after = page.Next
	}
	return jobs, nil
}

// reopen opens a copy of the data file in-process, as a restart would, and
// checks that the engine rebuilt from it is idle and consistent.
func (s *server) reopen(t *testing.T, p *plan) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := copyFile(s.data+suffix, dst+suffix); err != nil {
			t.Fatal(err)
		}
	}
	checkReopened(t, jobsapitest.StartAt(t, dst, jobsapitest.Options{}), p)
}

// checkReopened checks an engine rebuilt from the durable state: idle,
// consistent, every job of the plan there and succeeded.
func checkReopened(t *testing.T, s *jobsapitest.Server, p *plan) {
	t.Helper()
	if err := s.Engine.Idle(); err != nil {
		t.Errorf("reopened engine not idle: %v", err)
	}
	if err := s.Engine.CheckInvariants(); err != nil {
		t.Errorf("reopened engine: %v", err)
	}
	c := &client{hc: http.DefaultClient, base: func() string { return s.URL }, token: s.AdminToken}
	jobs, err := listAll(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	succeeded := 0
	for _, j := range jobs {
		if j.State == "succeeded" {
			succeeded++
		}
	}
	if len(jobs) != len(p.jobs) || succeeded != len(p.jobs) {
		t.Errorf("reopened: %d jobs, %d succeeded; want %d and %d", len(jobs), succeeded, len(p.jobs), len(p.jobs))
	}
}

// copyFile copies src to dst; a missing src is no error.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("copying the data file: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("copying the data file: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return nil
}
