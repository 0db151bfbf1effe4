package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

// figure draws something small; every test that wants a picture uses it.
const figure = "size(2cm); draw(unitcircle); dot((0,0));\n"

// testWorkRoot is a fresh work root that the sandbox uid can reach.
func testWorkRoot(t testing.TB) string { return sandboxtest.WorkRoot(t) }

// newRunner makes a Runner on a fresh work root with limits l (zero fields
// take the defaults), closed when the test ends.
func newRunner(t testing.TB, l Limits) *Runner {
	t.Helper()
	r, err := New(Config{Limits: l, WorkRoot: testWorkRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// workRootEntries lists r's work root but for the Runner's own shader
// cache template.
func workRootEntries(t testing.TB, r *Runner) []string {
	t.Helper()
	entries, err := os.ReadDir(r.workRoot)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if filepath.Join(r.workRoot, e.Name()) != filepath.Dir(r.template.cacheDir()) {
			names = append(names, e.Name())
		}
	}
	return names
}

// mainTask is a task with one main file holding src.
func mainTask(src string) Task {
	return Task{Files: []File{{Name: "main.asy", Data: []byte(src), Main: true}}}
}

// outputWait bounds a test's wait for a run's output or images.
const outputWait = 30 * time.Second

// start starts t on r with a new recording Sink.
func start(t testing.TB, ctx context.Context, r *Runner, task Task) (*Run, *sandboxtest.Sink) {
	t.Helper()
	s := sandboxtest.NewSink()
	run, err := r.Start(ctx, task, s)
	if err != nil {
		t.Fatal(err)
	}
	return run, s
}

// runTask runs t to the end and checks that nothing of it is left.
func runTask(t testing.TB, r *Runner, task Task) (Outcome, *sandboxtest.Sink) {
	t.Helper()
	run, s := start(t, context.Background(), r, task)
	o := run.Wait()
	assertGone(t, run)
	return o, s
}

// assertGone checks what Wait promises: no process of the task in its PID
// namespace and no work directory.
func assertGone(t testing.TB, run *Run) {
	t.Helper()
	if _, err := os.Stat(run.dir.path); !os.IsNotExist(err) {
		t.Errorf("work directory %s still there (%v)", run.dir.path, err)
	}
	if run.r.insecure {
		return
	}
	if run.proc.pidNS == 0 {
		t.Fatal("no PID namespace recorded")
	}
	// The kernel reuses a dead namespace's inode number at once, so a
	// sandbox started later (by a parallel test) may carry the same one:
	// only processes started before this run ended can be its own.
	// Called right after Wait returned, now is the tighter bound.
	ended := run.start.Add(run.outcome.Time + 100*time.Millisecond)
	if now := time.Now(); now.Before(ended) {
		ended = now
	}
	if pids := pidsInNamespace(t, run.proc.pidNS, run.proc.initPid, ended); len(pids) > 0 {
		t.Errorf("processes of the task survive: %v", pids)
	}
}

// pidsInNamespace lists host processes whose PID namespace is ns and that
// started no later than notAfter. A namespace whose init (its PID 1) is
// not initPid, the sandbox's own, is a later sandbox that got the same
// inode number: none of its processes count.
func pidsInNamespace(t testing.TB, ns uint64, initPid int, notAfter time.Time) []string {
	t.Helper()
	want := fmt.Sprintf("pid:[%d]", ns)
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	boot := bootTime(t)
	var found []string
	for _, p := range procs {
		link, err := os.Readlink(p + "/ns/pid")
		if err != nil || link != want {
			continue
		}
		if isNamespaceInit(p) && filepath.Base(p) != strconv.Itoa(initPid) {
			return nil // a later sandbox's namespace
		}
		if !processStart(p, boot).After(notAfter.Add(startSlack)) {
			comm, _ := os.ReadFile(p + "/comm")
			found = append(found, filepath.Base(p)+":"+strings.TrimSpace(string(comm)))
		}
	}
	return found
}

// isNamespaceInit says whether the process at procDir is PID 1 of its
// PID namespace (the last field of NSpid in its status).
func isNamespaceInit(procDir string) bool {
	data, err := os.ReadFile(procDir + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) > 1 && f[len(f)-1] == "1"
		}
	}
	return false
}

// wantOutcome compares an outcome's success and error text.
func wantOutcome(t testing.TB, o Outcome, success bool, errText string, s *sandboxtest.Sink) {
	t.Helper()
	if o.Success != success || o.Error != errText {
		t.Fatalf("outcome %+v, want success=%v error %q; output: %q", o, success, errText, tail(s.Text(""), 3000))
	}
}

// checkNextTask runs an ordinary figure on r: a hostile task must not
// disturb the next one.
func checkNextTask(t testing.TB, r *Runner) {
	t.Helper()
	o, s := runTask(t, r, mainTask(figure))
	wantOutcome(t, o, true, "", s)
	if s.ImageCount() != 1 || !HasMagic(FormatSVG, s.Image(0)) {
		t.Fatalf("next task: %d images", s.ImageCount())
	}
}

// startSlack covers the 10 ms granularity of process start times and of
// the boot time they are counted from.
const startSlack = 30 * time.Millisecond

// bootTime is when the machine booted, to 10 ms: now minus /proc/uptime.
func bootTime(t testing.TB) time.Time {
	t.Helper()
	now := time.Now()
	data, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	up, err := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return now.Add(-time.Duration(up * float64(time.Second)))
}

// processStart is when the process at procDir started (field 22 of its
// stat, in clock ticks of 1/100 s since boot); the zero time if unknown.
func processStart(procDir string, boot time.Time) time.Time {
	data, err := os.ReadFile(procDir + "/stat")
	if err != nil {
		return time.Time{}
	}
	i := strings.LastIndexByte(string(data), ')') // the command name may hold spaces
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 {
		return time.Time{}
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return boot.Add(time.Duration(ticks) * 10 * time.Millisecond)
}
