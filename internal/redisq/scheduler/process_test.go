package scheduler

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildUsher builds the usher binary into a temporary directory.
func buildUsher(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: %q %v", gomod, err)
	}
	bin := filepath.Join(t.TempDir(), "usher")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/usher")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/usher: %v\n%s", err, out)
	}
	return bin
}

// startProcess runs `usher scheduler` as a child process until the test ends.
func (e *env) startProcess(bin, node string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(bin, "scheduler", "--redis", e.url, "--node", node, "--log-level", "debug",
		"--listen", "127.0.0.1:0", "--admin-token", "usher_process-test-admin-token")
	cmd.Stderr = e.logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// Two `usher scheduler` processes: kill -9 of the leader, and the other
// leads within 5 s with the queue as it was, and starts the next task when
// a slot frees.
func TestKill9OfLeadingSchedulerProcess(t *testing.T) {
	bin := buildUsher(t)
	e := newEnv(t)
	e.addBackends(1, time.Minute)
	procs := map[string]*exec.Cmd{"a": e.startProcess(bin, "a"), "b": e.startProcess(bin, "b")}
	var token string
	e.waitFor("a process leads", wait, func() bool {
		token = e.rdb.Get(e.ctx(), e.keys.Leader()).Val()
		return token != ""
	})
	_, leader, _ := strings.Cut(token, ":")
	run, queued := e.submit(3000, false), e.submit(10000, false)
	e.waitFor("one out, one queued", wait, func() bool {
		return slices.Equal(e.outcoming(), []string{run}) && slices.Equal(e.queued(), []string{queued})
	})
	e.takeTask("b1")
	if err := procs[leader].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	died := time.Now()
	e.waitFor("the other process leads", takeover, func() bool {
		tok := e.rdb.Get(e.ctx(), e.keys.Leader()).Val()
		return tok != "" && tok != token
	})
	t.Logf("standby led %v after the kill", time.Since(died).Round(time.Millisecond))
	if !slices.Equal(e.queued(), []string{queued}) || e.executing()[run] != "3000" {
		t.Fatalf("queue %v executing %v", e.queued(), e.executing())
	}
	e.finish(run)
	e.waitFor("the new leader starts the queued task", wait, func() bool { return slices.Contains(e.outcoming(), queued) })
}
