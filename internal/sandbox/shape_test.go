package sandbox

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
)

// sandboxed runs argv (after prlimit with r's limits) in a sandbox on a
// scratch work directory, with stdin from the given reader, and returns
// its output and exit code once the whole tree is gone.
func sandboxed(t *testing.T, r *Runner, stdin io.Reader, argv ...string) (string, int) {
	t.Helper()
	dir, err := r.newWorkDir(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.remove()
	return sandboxedOn(t, r, dir, nil, stdin, argv...)
}

// sandboxedOn is sandboxed on the work directory dir, with mounts (bubblewrap
// arguments) besides it.
func sandboxedOn(t *testing.T, r *Runner, dir *workDir, mounts []string, stdin io.Reader, argv ...string) (string, int) {
	t.Helper()
	cmd := r.bwrapCommand(dir.path, mounts, append(r.limits.prlimitArgs(r.tools.prlimit, true), argv...))
	var out testbin.LogBuffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &out, stdin
	p, err := startProcess(cmd, true)
	if err != nil {
		t.Fatal(err)
	}
	stop := time.AfterFunc(30*time.Second, p.kill)
	defer stop.Stop()
	p.wait()
	if pids := pidsInNamespace(t, p.pidNS, p.initPid, time.Now()); len(pids) > 0 {
		t.Errorf("processes survive: %v", pids)
	}
	return out.String(), p.code
}

// What the job sees: the sandbox uid, no /etc or other host directories,
// a clean environment, no privileges, no network, a read-only root, its
// own PID namespace with no user namespaces, and the rlimits.
func TestSandboxShape(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	for _, tc := range []struct {
		name string
		argv []string
		want []string // each must be (the start of) a line
		not  []string // none may appear
	}{
		{"uid", []string{"/usr/bin/id"}, []string{"uid=65534 gid=65534 groups=65534"}, nil},
		{"root directory", []string{"/bin/ls", "-A", "/"}, []string{"usr", "task", "tmp", "proc", "dev"},
			[]string{"etc", "home", "root", "work", "run", "opt", "srv", "mnt", "boot"}},
		{"environment", []string{"/usr/bin/env"}, []string{"PATH=/usr/bin:/bin", "HOME=/task/.home", "ASYMPTOTE_HOME=/task/.home/.asy", "PWD=/task"}, nil},
		{"no new privileges", []string{"/bin/grep", "-E", "NoNewPrivs|CapEff|CapPrm", "/proc/self/status"},
			[]string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000"}, nil},
		{"network", []string{"/bin/cat", "/proc/net/dev"}, []string{"lo:"}, []string{"eth", "ens", "wl", "veth", "docker"}},
		{"read-only root", []string{"/bin/sh", "-c", "for f in /x /usr/x /var/lib/texmf/x /proc/x; do touch $f; done 2>&1; touch /task/ok /tmp/ok && echo writable"},
			[]string{"touch: cannot touch '/x': Read-only file system", "touch: cannot touch '/usr/x': Read-only file system",
				"touch: cannot touch '/var/lib/texmf/x': Read-only file system", "writable"}, nil},
		{"pid namespace", []string{"/bin/sh", "-c", `echo pid=$$; [ $(ls /proc | grep -c '^[0-9]') -le 5 ] && echo few-processes`},
			[]string{"pid=1", "few-processes"}, nil},
		{"user namespaces off", []string{"/bin/sh", "-c", "unshare -U true; echo rc=$?"}, []string{"rc=1"}, nil},
		{"hostname", []string{"/bin/cat", "/proc/sys/kernel/hostname"}, []string{"sandbox"}, nil},
		{"rlimits", []string{"/bin/cat", "/proc/self/limits"}, []string{
			"Max address space         1073741824           1073741824           bytes",
			"Max cpu time              60                   61                   seconds",
			"Max file size             33554432             33554432             bytes",
			"Max processes             32                   32                   processes",
			"Max open files            256                  256                  files",
			"Max core file size        0                    0                    bytes",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := sandboxed(t, r, nil, tc.argv...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			for _, w := range tc.want {
				if !hasLine(lines, w) {
					t.Errorf("no line %q in:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("%q in:\n%s", n, out)
				}
			}
			if tc.name == "environment" && len(lines) != 4 {
				t.Errorf("environment has more than PATH, HOME, ASYMPTOTE_HOME and bubblewrap's PWD:\n%s", out)
			}
			_ = code
		})
	}
}

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), want) {
			return true
		}
	}
	return false
}

// On the host, every process of the sandbox runs as the sandbox uid even
// though the server is root.
func TestHostSeesSandboxUID(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	p, out, _ := startSandboxed(t, r, "/bin/sh", "-c", "sleep 30 & echo started; wait")
	if line, _ := out.ReadString('\n'); line != "started\n" {
		t.Fatalf("read %q", line)
	}
	pids := pidsInNamespace(t, p.pidNS, p.initPid, time.Now())
	if len(pids) < 2 {
		t.Fatalf("processes in the sandbox: %v", pids)
	}
	want := r.uid
	if os.Geteuid() != 0 {
		want = os.Geteuid()
	}
	for _, pid := range pids {
		status, err := os.ReadFile("/proc/" + strings.Split(pid, ":")[0] + "/status")
		if err != nil {
			t.Fatal(err)
		}
		if uid := statusField(string(status), "Uid:"); uid != strings.Repeat(strconv.Itoa(want)+"\t", 3)+strconv.Itoa(want) {
			t.Errorf("%s runs as uid %q on the host", pid, uid)
		}
	}
	p.kill()
	testwait.Receive(t, 30*time.Second, p.exited, "the killed sandbox exiting")
	if left := pidsInNamespace(t, p.pidNS, p.initPid, time.Now()); len(left) > 0 {
		t.Fatalf("processes survive: %v", left)
	}
}

func statusField(status, key string) string {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Background children do not outlive the sandbox's main process.
func TestBackgroundChildrenDie(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	began := time.Now()
	out, code := sandboxed(t, r, nil, "/bin/sh", "-c", "sleep 60 & sleep 60 & echo bye")
	if out != "bye\n" || code != 0 {
		t.Fatalf("output %q, code %d", out, code)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("waited %v for background children", took)
	}
}

// RLIMIT_NPROC counts per user namespace: two sandboxes of the same uid
// each hold 9 processes at once under a limit of 10; one sandbox cannot
// exceed its own limit of 4.
func TestProcessLimitIsPerSandbox(t *testing.T) {
	t.Parallel()
	const script = `for i in 1 2 3 4 5 6 7 8; do sleep 30 & done; echo forked; read x; echo done`
	r := newRunner(t, Limits{Processes: 10})
	type sandbox struct {
		p     *process
		out   *bufio.Reader
		stdin *os.File
		text  string
	}
	boxes := make([]*sandbox, 2)
	for i := range boxes {
		p, out, stdin := startSandboxed(t, r, "/bin/sh", "-c", script)
		boxes[i] = &sandbox{p: p, out: out, stdin: stdin}
	}
	for _, b := range boxes {
		line, _ := b.out.ReadString('\n') // both now hold 9 processes
		b.text = line
	}
	for _, b := range boxes {
		b.stdin.Write([]byte("go\n"))
		b.stdin.Close()
		rest, _ := io.ReadAll(b.out)
		b.text += string(rest)
		testwait.Receive(t, 30*time.Second, b.p.exited, "the sandbox exiting after its input ended")
	}
	for i, b := range boxes {
		if b.text != "forked\ndone\n" {
			t.Errorf("sandbox %d: %q", i, b.text)
		}
	}
	small := newRunner(t, Limits{Processes: 4})
	out, _ := sandboxed(t, small, strings.NewReader("go\n"), "/bin/sh", "-c", script)
	if !strings.Contains(out, "Cannot fork") {
		t.Fatalf("the limit of 4 did not hold: %q", out)
	}
}

// startSandboxed starts argv under prlimit in a sandbox with its stdin and
// stdout (with stderr) as pipes.
func startSandboxed(t *testing.T, r *Runner, argv ...string) (*process, *bufio.Reader, *os.File) {
	t.Helper()
	dir, err := r.newWorkDir(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.remove() })
	cmd := r.bwrapCommand(dir.path, nil, append(r.limits.prlimitArgs(r.tools.prlimit, true), argv...))
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	p, err := startProcess(cmd, true)
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	// When the sandbox ended, seen as it happened: the cleanup runs much
	// later, and processes that started since may sit in a namespace that
	// reuses this one's number.
	ended := make(chan time.Time, 1)
	go func() { <-p.exited; ended <- time.Now() }()
	t.Cleanup(func() {
		p.kill()
		at := testwait.Receive(t, 30*time.Second, ended, "the killed sandbox exiting")
		outR.Close()
		if left := pidsInNamespace(t, p.pidNS, p.initPid, at); len(left) > 0 {
			t.Errorf("processes survive: %v", left)
		}
	})
	go p.wait()
	return p, bufio.NewReader(outR), inW
}
