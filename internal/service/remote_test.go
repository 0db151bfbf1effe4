package service

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
)

// usherBinary builds cmd/usher once per test run.
func usherBinary(t *testing.T) string { return testbin.Usher(t, false) }

var listeningRE = regexp.MustCompile(`addr=(\S+)`)

// startBackendProcess runs `usher backend` as its own process on listen
// (127.0.0.1:0 for any port) and returns it with its address.
func startBackendProcess(t *testing.T, listen string) (*exec.Cmd, string) {
	t.Helper()
	work := sandboxtest.WorkRoot(t)
	cmd := exec.Command(usherBinary(t), "backend", "--listen", listen, "--work-root", work)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "listening") {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd, a
	case <-time.After(30 * time.Second):
		t.Fatal("usher backend did not start listening")
		return nil, ""
	}
}

// waitForRemote waits until the service has the remote backend in its pool.
func waitForRemote(t *testing.T, ts *testService) {
	t.Helper()
	testwait.Eventually(t, 20*time.Second, func() bool {
		snap, err := ts.dispatcher().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return snap.Tiers[0].Limit > 0
	}, "the remote backend joined")
}

func TestRemoteBackendKilledMidTaskAndBack(t *testing.T) {
	proc, addr := startBackendProcess(t, "127.0.0.1:0")
	ts := startService(t, 0, func(c *Config) {
		c.RemoteBackends = []string{"ws://" + addr}
		c.CacheBytes = 0
	})
	waitForRemote(t, ts)

	c := dial(t, ts.srv)
	c.compile(quickFigure, nil)
	if done := final(t, c.rest()); done.body["success"] != true {
		t.Fatalf("task on the remote backend: %v", done.body)
	}

	spinner := dial(t, ts.srv)
	spinner.compile(spinForever, map[string]any{"timeout": 30000})
	if _, q := spinner.until("queue"); q.body["passed"] != true {
		t.Fatalf("spinner queued: %v", q.body)
	}
	waitBusy(t, addr)
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	proc.Wait()
	done := final(t, spinner.rest())
	if done.verb != "complete" || done.body["error"] != "Backend went away during the task" {
		t.Fatalf("task on the killed backend ended %s %v", done.verb, done.body)
	}

	startBackendProcess(t, addr) // the backend comes back at the same address
	waitForRemote(t, ts)
	again := dial(t, ts.srv)
	again.compile(quickFigure+"// again\n", nil)
	if done := final(t, again.rest()); done.body["success"] != true {
		t.Fatalf("task after the backend came back: %v", done.body)
	}
}

// waitBusy waits until the backend at addr holds a task (its /readyz
// answers 503).
func waitBusy(t *testing.T, addr string) {
	t.Helper()
	testwait.Eventually(t, 20*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, "the backend took the task")
}

func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
