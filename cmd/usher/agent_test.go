package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
)

// usherBinary is the usher binary, built once for the tests that run it
// as a process.
func usherBinary(t *testing.T) string { return testbin.Usher(t, false) }

func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }

// agentProc is a running `usher agent` process.
type agentProc struct {
	cmd   *exec.Cmd
	lines chan string // its log, line by line
	done  chan struct{}
	err   error
	mu    sync.Mutex
	log   []string
}

// startAgent runs `usher agent` against srv with an agent token, the given
// flags and command; the test's end kills it if it still runs.
func startAgent(t *testing.T, srv *jobsapitest.Server, args ...string) *agentProc {
	t.Helper()
	tok, err := client.New(srv.URL, srv.AdminToken).CreateToken(t.Context(), "agent-"+t.Name(), client.RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(usherBinary(t), append([]string{"agent", "--server", srv.URL, "--wait", "2s"}, args...)...)
	cmd.Env = append(os.Environ(), "USHER_TOKEN="+tok.Secret)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agentProc{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	go a.read(stderr)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		testwait.Receive(t, 30*time.Second, a.done, "the end of the killed agent's stderr")
		if t.Failed() {
			t.Logf("agent log:\n%s", a.logText())
		}
	})
	return a
}

func (a *agentProc) read(r interface{ Read([]byte) (int, error) }) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		a.mu.Lock()
		a.log = append(a.log, sc.Text())
		a.mu.Unlock()
		select {
		case a.lines <- sc.Text():
		default:
		}
	}
	a.err = a.cmd.Wait()
	close(a.done)
}

func (a *agentProc) logText() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.log, "\n")
}

// waitLog waits for a log line containing s.
func (a *agentProc) waitLog(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l := <-a.lines:
			if strings.Contains(l, s) {
				return
			}
		case <-a.done:
			t.Fatalf("agent exited (%v) before logging %q", a.err, s)
		case <-timeout:
			t.Fatalf("agent never logged %q", s)
		}
	}
}

// wait waits for the agent to exit and returns its error.
func (a *agentProc) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-a.done:
		return a.err
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not exit")
		return nil
	}
}

func (a *agentProc) signal(t *testing.T, s os.Signal) {
	t.Helper()
	if err := a.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
}

// agentServer starts a server with the given queues and returns it with an
// admin client.
func agentServer(t *testing.T, queues ...string) (*jobsapitest.Server, *client.Client) {
	t.Helper()
	srv := jobsapitest.Start(t)
	c := client.New(srv.URL, srv.AdminToken)
	for _, q := range queues {
		if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: q}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, c
}

// waitFinished polls the server until the job finished, and returns it.
func waitFinished(t *testing.T, c *client.Client, id string) client.Job {
	t.Helper()
	var j client.Job
	done := func() bool {
		var err error
		if j, err = c.Job(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return j.Finished()
	}
	if err := testwait.Until(30*time.Second, done, "job %s finished", id); err != nil {
		t.Fatalf("%v: %+v", err, j)
	}
	return j
}

func enqueueJobs(t *testing.T, c *client.Client, specs ...client.JobSpec) []string {
	t.Helper()
	ids, err := c.Enqueue(t.Context(), specs...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// The payload reaches the command as arguments (a string as one, an array
// as several, anything else as JSON text) or on stdin (a string as its raw
// text, anything else as JSON), with the job's id, queue and attempt in the
// environment and without the agent's token.
func TestAgentPayload(t *testing.T) {
	srv, c := agentServer(t)
	for _, q := range []string{"args", "stdin"} { // routed by capability: the server picks the queue
		if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: q, Requires: []string{q}}); err != nil {
			t.Fatal(err)
		}
	}
	startAgent(t, srv, "--queue", "args", "--capability", "args", "--concurrency", "3", "--",
		"sh", "-c", `printf '[%s]' "$@"; echo " $USHER_JOB_QUEUE $USHER_JOB_ATTEMPT ${USHER_TOKEN:-no-token}"`, "sh")
	startAgent(t, srv, "--queue", "stdin", "--capability", "stdin", "--payload", "stdin", "--concurrency", "3", "--",
		"sh", "-c", `cat; echo "|$USHER_JOB_ID|${USHER_TOKEN:-no-token}"`)
	tests := []struct {
		queue   string
		payload json.RawMessage
		want    string // %s: the job's id
	}{
		{"args", raw("a b"), "[a b] args 1 no-token\n"},
		{"args", raw([]any{"x", "y z", 3}), "[x][y z][3] args 1 no-token\n"},
		{"args", raw(map[string]int{"k": 1}), `[{"k":1}] args 1 no-token` + "\n"},
		{"args", nil, "[] args 1 no-token\n"},
		{"stdin", raw("line 1\nline 2\n"), "line 1\nline 2\n|%s|no-token\n"},
		{"stdin", raw(map[string]int{"k": 1}), `{"k":1}|%s|no-token` + "\n"},
	}
	var specs []client.JobSpec
	for _, tt := range tests {
		specs = append(specs, client.JobSpec{Queue: tt.queue, Payload: tt.payload, TimeoutMs: 30000})
	}
	ids := enqueueJobs(t, c, specs...)
	for i, tt := range tests {
		want := tt.want
		if strings.Contains(want, "%s") {
			want = fmt.Sprintf(want, ids[i])
		}
		j := waitFinished(t, c, ids[i])
		if j.State != client.StateSucceeded || j.Output != want {
			t.Errorf("%s payload %s: %s with output %q, want succeeded with %q", tt.queue, tt.payload, j.State, j.Output, want)
		}
	}
}

// Exit codes, merged output, the time limit (SIGTERM to the process
// group, SIGKILL after --kill-grace for a job that ignores it) and the
// output's tail cap.
func TestAgentOutcomes(t *testing.T) {
	srv, c := agentServer(t, "sh")
	startAgent(t, srv, "--concurrency", "4", "--kill-grace", "300ms", "--output-limit", "1KiB", "--",
		"sh", "-c", `eval "$1"`, "sh")
	tests := []struct {
		name, script string
		timeoutMs    int64
		state        client.State
		exit         int
		output, err  string // parts of the output and error
	}{
		{"exit code and stderr", "echo out; echo err >&2; exit 3", 30000, client.StateFailed, 3, "out\nerr\n", "exit status 3"},
		{"timeout kills the group", "sleep 30 & wait", 300, client.StateFailed, 128 + 15, "", "time limit (300ms)"},
		{"SIGKILL after the grace", "trap '' TERM; echo trapped; sleep 30", 300, client.StateFailed, 128 + 9, "trapped", "killed by signal killed"},
		{"tail of the output", "head -c 5000 /dev/zero | tr '\\0' a; echo END", 30000, client.StateSucceeded, 0, "bytes of output cut …]\naaaa", ""},
	}
	var specs []client.JobSpec
	for _, tt := range tests {
		specs = append(specs, client.JobSpec{Queue: "sh", Payload: raw(tt.script), TimeoutMs: tt.timeoutMs})
	}
	ids := enqueueJobs(t, c, specs...)
	for i, tt := range tests {
		j := waitFinished(t, c, ids[i])
		if j.State != tt.state || j.ExitCode == nil || *j.ExitCode != tt.exit || !strings.Contains(j.Output, tt.output) ||
			!strings.Contains(j.Error, tt.err) {
			t.Errorf("%s: %s exit %v output %q error %q; want %s exit %d output with %q error with %q",
				tt.name, j.State, exitText(j.ExitCode), j.Output, j.Error, tt.state, tt.exit, tt.output, tt.err)
		}
		if took := timeOf(j.FinishedAt).Sub(timeOf(j.StartedAt)); took > 10*time.Second {
			t.Errorf("%s: took %s", tt.name, took)
		}
	}
	if j := waitFinished(t, c, ids[3]); len(j.Output) > 1200 || !strings.HasSuffix(j.Output, "aaaaEND\n") {
		t.Errorf("tail: %d bytes, ends %q", len(j.Output), j.Output[max(len(j.Output)-20, 0):])
	}
}

// mkfifos makes named pipes in a temporary directory: the tests' way to
// know that a job runs and to let it go on.
func mkfifos(t *testing.T, names ...string) map[string]string {
	t.Helper()
	dir, paths := t.TempDir(), map[string]string{}
	for _, n := range names {
		paths[n] = filepath.Join(dir, n)
		if err := syscall.Mkfifo(paths[n], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// SIGTERM lets the running job finish and report success, fetches no more
// work, and the agent exits 0 after leaving.
func TestAgentGracefulSignal(t *testing.T) {
	srv, c := agentServer(t, "sh")
	f := mkfifos(t, "started", "go")
	a := startAgent(t, srv, "--", "sh", "-c", `eval "$1"`, "sh")
	id := enqueueJobs(t, c, client.JobSpec{Queue: "sh", TimeoutMs: 60000,
		Payload: raw(fmt.Sprintf("echo started > %s; read x < %s; echo finished $x", f["started"], f["go"]))})[0]
	if _, err := os.ReadFile(f["started"]); err != nil { // blocks until the job runs
		t.Fatal(err)
	}
	a.signal(t, syscall.SIGTERM)
	a.waitLog(t, "agent: stopping")
	later := enqueueJobs(t, c, client.JobSpec{Queue: "sh", Payload: raw("echo should not run")})[0]
	if err := os.WriteFile(f["go"], []byte("now\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.wait(t); err != nil {
		t.Fatalf("agent exited with %v after SIGTERM\n%s", err, a.logText())
	}
	if j := waitFinished(t, c, id); j.State != client.StateSucceeded || j.Output != "finished now\n" {
		t.Fatalf("running job after SIGTERM: %s %q %q", j.State, j.Output, j.Error)
	}
	if j, err := c.Job(t.Context(), later); err != nil || j.State != client.StateQueued {
		t.Fatalf("job enqueued after SIGTERM: %+v, %v", j, err)
	}
	if !strings.Contains(a.logText(), "worker: left") {
		t.Fatalf("the agent did not leave:\n%s", a.logText())
	}
}

// A second signal aborts: the job's processes are killed at once and the
// job is reported failed.
func TestAgentSecondSignalAborts(t *testing.T) {
	srv, c := agentServer(t, "sh")
	f := mkfifos(t, "started")
	a := startAgent(t, srv, "--kill-grace", "30s", "--", "sh", "-c", `eval "$1"`, "sh")
	id := enqueueJobs(t, c, client.JobSpec{Queue: "sh", TimeoutMs: 60000,
		Payload: raw(fmt.Sprintf("echo started > %s; sleep 60", f["started"]))})[0]
	if _, err := os.ReadFile(f["started"]); err != nil {
		t.Fatal(err)
	}
	a.signal(t, syscall.SIGTERM)
	a.waitLog(t, "agent: stopping")
	a.signal(t, syscall.SIGINT)
	a.waitLog(t, "agent: aborting")
	if err := a.wait(t); err != nil {
		t.Fatalf("agent exited with %v after the abort\n%s", err, a.logText())
	}
	j := waitFinished(t, c, id)
	if j.State != client.StateFailed || j.ExitCode == nil || *j.ExitCode != 128+9 || !strings.Contains(j.Error, "aborted") {
		t.Fatalf("aborted job: %s exit %s error %q", j.State, exitText(j.ExitCode), j.Error)
	}
}

// timeOf is a job's time, or the zero time when it was not reached.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
