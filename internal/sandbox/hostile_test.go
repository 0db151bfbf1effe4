package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// tightLimits keep the hostile battery fast.
var tightLimits = Limits{
	MaxTimeout:   20 * time.Second,
	AddressSpace: 256 * miB,
	FileSize:     1 * miB,
	Output:       64 * kiB,
	Disk:         4 * miB,
}

func randomName(t testing.TB) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "usher-escape-" + hex.EncodeToString(b[:])
}

// noHostFile fails if path exists on the host.
func noHostFile(path string) func(t *testing.T) {
	return func(t *testing.T) {
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("the job created %s on the host (%v)", path, err)
			os.Remove(path)
		}
	}
}

// latexWriteLimit is the time limit of the jobs whose LaTeX tries to write
// outside the work directory: TeX refuses the write ("Not writing to …"),
// and the job then runs until the limit ends it, so the limit must leave
// TeX time to start and say so even when the tests' parallel asy
// processes load the machine (a 1 s limit did not, in a full test run).
const latexWriteLimit = 5 * time.Second

// Each hostile job ends with its specific error, leaves no process and no
// work directory, and the next task runs normally.
func TestHostile(t *testing.T) {
	t.Parallel()
	tight := newRunner(t, tightLimits)
	roomy := newRunner(t, Limits{})
	escape := randomName(t)
	for _, tc := range []struct {
		name    string
		r       *Runner
		src     string
		timeout time.Duration
		want    string
		out     []string // the output contains each
		notOut  []string // the output contains none
		check   func(t *testing.T)
	}{
		{name: "cpu spin", src: `while(true) {}`, timeout: time.Second,
			want: "Execution aborted due to the time limit (1000ms)"},
		{name: "zero-cpu hang in latex", src: `label("\input{nonexistent-file}");`, timeout: time.Second,
			want: "Execution aborted due to the time limit (1000ms)"},
		{name: "memory bomb", src: `real[] a; for(int i = 0;; ++i) a.push(i);`,
			want: "Execution failed with code 1", out: []string{"out of memory"}},
		{name: "deep recursion", src: `int f(int n) { return f(n+1) + 1; } f(0);`,
			want: "Execution failed with code 134", out: []string{"Stack overflow"}},
		{name: "output flood", src: `while(true) write("flood");`,
			want: "Execution aborted due to the output limit (65536B)"},
		{name: "one huge file", src: `file f = output("big.txt"); string s = "x"; for(int i = 0; i < 12; ++i) s += s; while(true) write(f, s);`,
			want: "Execution failed with code 153"}, // SIGXFSZ at FileSize
		{name: "disk filler", src: `string s = "x"; for(int i = 0; i < 19; ++i) s += s; for(int i = 0;; ++i) { file f = output("f" + string(i)); write(f, s); close(f); }`,
			want: "Execution aborted due to the output limit (4194304B)"},
		{name: "thousands of files", src: `for(int i = 0; i < 3000; ++i) { file f = output("f" + string(i)); write(f, "x"); close(f); }`,
			want: "Execution aborted due to the output limit (4194304B)"},
		{name: "thousands of files within the disk limit", r: roomy, src: `for(int i = 0; i < 3000; ++i) { file f = output("f" + string(i)); write(f, "x"); close(f); }`,
			want: "No image output"},
		{name: "asy reads /etc/passwd", src: `file f = input("/etc/passwd"); write(f);`,
			want: "Execution failed with code 1", out: []string{"Read from other directories disabled"}, notOut: []string{"root:x:0:0"}},
		{name: "latex reads /etc/passwd", src: `label("\input{/etc/passwd}");`, timeout: time.Second,
			want: "Execution aborted due to the time limit (1000ms)", notOut: []string{"root:x:0:0"}},
		{name: "system", src: `system("id");`,
			want: "Execution failed with code 1", out: []string{"system() call disabled"}, notOut: []string{"uid="}},
		{name: "asy writes /tmp", src: fmt.Sprintf(`file f = output("/tmp/%s"); write(f, "x"); close(f);`, escape),
			want: "Execution failed with code 1", out: []string{"Write to other directories disabled"}, check: noHostFile("/tmp/" + escape)},
		{name: "asy writes ..", src: fmt.Sprintf(`file f = output("../%s"); write(f, "x"); close(f);`, escape),
			want: "Execution failed with code 1", out: []string{"Write to other directories disabled"}, check: noHostFile(filepath.Join(tight.workRoot, escape))},
		{name: "latex writes /tmp", src: fmt.Sprintf(`label("\immediate\openout1=/tmp/%s.tex \immediate\write1{x}\immediate\closeout1 x");`, escape),
			timeout: latexWriteLimit, want: "Execution aborted due to the time limit (5000ms)",
			out: []string{"Not writing to /tmp/"}, check: noHostFile("/tmp/" + escape + ".tex")},
		{name: "latex writes ..", src: fmt.Sprintf(`label("\immediate\openout1=../%s.tex \immediate\write1{x}\immediate\closeout1 x");`, escape),
			timeout: latexWriteLimit, want: "Execution aborted due to the time limit (5000ms)",
			out: []string{"Not writing to ../"}, check: noHostFile(filepath.Join(tight.workRoot, escape+".tex"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.r
			if r == nil {
				r = tight
			}
			task := mainTask(tc.src)
			task.Timeout = tc.timeout
			o, s := runTask(t, r, task)
			wantOutcome(t, o, tc.want == "", tc.want, s)
			out := s.Text("")
			for _, w := range tc.out {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q: %q", w, tail(out, 2000))
				}
			}
			for _, w := range tc.notOut {
				if strings.Contains(out, w) {
					t.Errorf("output reveals %q", w)
				}
			}
			if tc.check != nil {
				tc.check(t)
			}
			checkNextTask(t, r)
		})
	}
}

// A file outside the work directory (a sibling of work directories, and
// the test's own temporary directory) is invisible to asy and latex. The
// same job without the sandbox reveals it: the check can fail.
func TestHostFilesInvisible(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{MaxTimeout: 10 * time.Second})
	marker := randomName(t)
	secret := filepath.Join(r.workRoot, "secret.tex")
	if err := os.WriteFile(secret, []byte(`\errmessage{`+marker+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`label("\input{%s}");`+"\n"+`label("\input{../secret.tex}");`+"\n", secret)
	task := mainTask(src)
	task.Timeout = time.Second
	o, s := runTask(t, r, task)
	wantOutcome(t, o, false, "Execution aborted due to the time limit (1000ms)", s)
	if strings.Contains(s.Text(""), marker) {
		t.Fatal("the sandboxed job read a host file")
	}
	checkNextTask(t, r)

	insecure, err := New(Config{Insecure: true, WorkRoot: r.workRoot, Limits: Limits{MaxTimeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	control := task
	control.Timeout = 5 * time.Second // room for latex on a loaded machine
	_, s = runTask(t, insecure, control)
	if !strings.Contains(s.Text(""), marker) {
		t.Fatalf("control: without the sandbox the marker should show: %q", tail(s.Text(""), 2000))
	}
}

// The job has no network: asy fetches URLs (input("http://…") uses
// libcurl even with -safe), yet a listener on the host's loopback gets no
// connection. Without the sandbox it does: the check can fail.
func TestNoNetwork(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var connections atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			c.Close()
		}
	}()
	src := fmt.Sprintf(`file f = input("http://%s/x.asy"); write(f);`, ln.Addr())
	r := newRunner(t, Limits{})
	o, s := runTask(t, r, mainTask(src))
	wantOutcome(t, o, false, "No image output", s)
	if out := s.Text(""); !strings.Contains(out, "Couldn't connect to server") {
		t.Errorf("output %q", out)
	}
	if n := connections.Load(); n != 0 {
		t.Fatalf("the listener got %d connections from the sandbox", n)
	}
	checkNextTask(t, r)

	insecure, err := New(Config{Insecure: true, WorkRoot: r.workRoot})
	if err != nil {
		t.Fatal(err)
	}
	runTask(t, insecure, mainTask(src))
	if connections.Load() == 0 {
		t.Fatal("control: without the sandbox asy should have connected")
	}
}

// A second job cannot see what another job wrote, neither while the first
// runs nor after it.
func TestJobsAreIsolated(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	marker := randomName(t)
	taskA := mainTask(fmt.Sprintf(`file f = output("secret.tex"); write(f, "\errmessage{%s}"); close(f); write("ready"); while(true) {}`, marker))
	taskA.Timeout = 30 * time.Second
	runA, sA := start(t, context.Background(), r, taskA)
	sA.WaitOutput(t, outputWait, "ready")
	secretA := filepath.Join(runA.dir.path, "secret.tex")
	if _, err := os.Stat(secretA); err != nil {
		t.Fatalf("job A did not write its file: %v", err)
	}
	base := filepath.Base(runA.dir.path)
	srcB := fmt.Sprintf(`label("\input{%s}"); label("\input{../%s/secret.tex}"); label("\input{/task/../%s/secret.tex}");`, secretA, base, base)
	taskB := mainTask(srcB)
	taskB.Timeout = time.Second
	for _, when := range []string{"while A runs", "after A"} {
		o, sB := runTask(t, r, taskB)
		wantOutcome(t, o, false, "Execution aborted due to the time limit (1000ms)", sB)
		if strings.Contains(sB.Text(""), marker) {
			t.Fatalf("%s: job B read job A's file", when)
		}
		if when == "while A runs" {
			runA.Shorten(0)
			wantOutcome(t, runA.Wait(), false, "Execution aborted due to the time limit (0ms)", sA)
			assertGone(t, runA)
		}
	}
	checkNextTask(t, r)
}

// Faults asy cannot produce (it has no symlink, mkfifo or mkdir): a fake
// plants a symlink to a host file, a FIFO or a directory where the image
// should be, just before the runner reads it. None is followed, read or
// waited on.
func TestImageLeftoversFake(t *testing.T) {
	t.Parallel()
	marker := randomName(t)
	hostFile := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(hostFile, []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		plant func(path string) error
	}{
		{"symlink to a host file", func(p string) error { return os.Symlink(hostFile, p) }},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o666) }},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t, Limits{})
			r.beforeImage = func(dir, name string) {
				p := filepath.Join(dir, name)
				if err := os.Remove(p); err != nil {
					t.Errorf("remove the real image: %v", err)
				}
				if err := tc.plant(p); err != nil {
					t.Errorf("plant: %v", err)
				}
			}
			began := time.Now()
			o, s := runTask(t, r, mainTask(figure))
			wantOutcome(t, o, false, "No image output", s)
			if s.ImageCount() != 0 {
				t.Fatalf("sent %d images", s.ImageCount())
			}
			if took := time.Since(began); took > 20*time.Second {
				t.Fatalf("took %v", took)
			}
			r.beforeImage = nil
			checkNextTask(t, r)
		})
	}
}

// An image over Limits.Image is not sent.
func TestImageLimit(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{Image: 1000})
	o, s := runTask(t, r, mainTask(figure+`label("$\int_0^1 x^2\,dx$");`))
	wantOutcome(t, o, false, "Execution aborted due to the output limit (1000B)", s)
	if s.ImageCount() != 0 {
		t.Fatal("sent an image over the limit")
	}
}
