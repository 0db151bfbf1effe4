package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	// sandboxDir is where the work directory appears inside the sandbox.
	sandboxDir = "/task"
	// homeName is HOME (and ASYMPTOTE_HOME's parent) inside the work
	// directory; it cannot clash with a task's files, whose names end in one of
	// Extensions.
	homeName = ".home"
	// outputName is asy's output prefix, relative to the work directory
	// (asy's working directory): asy writes out.svg, out.pdf or out.png
	// there, and out_* scratch files. Relative on purpose: with any
	// directory in the prefix (absolute or "./out"), asy 2.85 hands latex
	// an empty job name after a TeX error in a label, and the user sees
	// "Not writing to .aux" instead of their error (TestLaTeXErrorIsReported).
	outputName = "out"
	// nobody is the default sandbox uid and gid, and the uid inside.
	nobody = 65534
	// statusFD is bubblewrap's --json-status-fd in the child (ExtraFiles[0]).
	statusFD = 3
)

// tools are the programs a run needs, as absolute host paths. All but
// bwrap live under /usr, which is mounted at the same place inside.
type tools struct {
	bwrap, asy, prlimit, sh, bash, stdbuf, xvfb string
}

// rootLinks are the top-level names that merged-/usr systems make links
// into /usr; the sandbox mirrors each as the host has it (link or directory).
var rootLinks = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// rootfsArgs are the bubblewrap arguments for the read-only root: /usr,
// the top-level links, /var/lib/texmf (TeX's formats and font maps), a
// private /proc and /dev. Nothing of /etc: asy, latex, dvisvgm and gs
// work without it (TestSandboxShape checks), so no host configuration or
// secret (passwd, shadow, hosts, ssl keys) is visible.
func rootfsArgs() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, name := range rootLinks {
		p := "/" + name
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				continue
			}
			args = append(args, "--symlink", target, p)
		case fi.IsDir():
			args = append(args, "--ro-bind", p, p)
		}
	}
	return append(args,
		"--ro-bind-try", "/var/lib/texmf", "/var/lib/texmf",
		"--proc", "/proc",
		"--dev", "/dev")
}

// sandboxEnv is the whole environment inside the sandbox (or of asy in
// insecure mode, with home at the host path).
func sandboxEnv(home string) []string {
	return []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + home,
		"ASYMPTOTE_HOME=" + home + "/.asy",
	}
}

// bwrapArgs is bubblewrap's command line that runs argv in the sandbox with
// the host directory workDir mounted read-write at sandboxDir, then the
// task's other mounts (bubblewrap arguments), if any: the spare display's
// socket directory (spareMount) and the shader cache (shaderCacheMounts).
func (r *Runner) bwrapArgs(workDir string, mounts, argv []string) []string {
	args := r.bwrapHead(sandboxEnv(sandboxDir + "/" + homeName))
	args = append(args, "--bind", workDir, sandboxDir)
	args = append(args, mounts...)
	return r.bwrapTail(args, sandboxDir, argv)
}

// spareMount binds the spare display's socket directory, which was moved
// into workDir (spare.go), read-only at /tmp/.X11-unix.
func spareMount(workDir string) []string {
	return []string{"--ro-bind", filepath.Join(workDir, spareSocketName), "/tmp/.X11-unix"}
}

// spareArgs is bubblewrap's command line for a spare display (spare.go):
// Xvfb on display :0 under the task rlimits, its socket directory the host
// directory socketDir, its display number written on spareDisplayFD once
// it serves clients.
func (r *Runner) spareArgs(socketDir string) []string {
	args := r.bwrapHead([]string{"PATH=/usr/bin:/bin"})
	args = append(args, "--bind", socketDir, "/tmp/.X11-unix")
	argv := r.limits.prlimitArgs(r.tools.prlimit, true)
	argv = append(argv, r.tools.xvfb, ":0", "-displayfd", strconv.Itoa(spareDisplayFD))
	return r.bwrapTail(args, "/", append(argv, xvfbArgs...))
}

// bwrapHead starts every bubblewrap command line: new namespaces of every
// kind, the unprivileged uid, only env as environment, the read-only root
// and a private /tmp of Limits.Disk bytes.
func (r *Runner) bwrapHead(env []string) []string {
	id := strconv.Itoa(nobody)
	args := []string{
		r.tools.bwrap,
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session",
		"--uid", id, "--gid", id, "--hostname", "sandbox",
		"--clearenv",
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, r.rootfs...)
	return append(args, "--size", strconv.FormatInt(r.limits.Disk, 10), "--tmpfs", "/tmp")
}

// bwrapTail ends a bubblewrap command line: the root read-only, dir as the
// working directory, argv's first process as PID 1, the status fd.
func (r *Runner) bwrapTail(args []string, dir string, argv []string) []string {
	args = append(args,
		"--remount-ro", "/",
		"--chdir", dir,
		"--as-pid-1",
		"--json-status-fd", strconv.Itoa(statusFD),
		"--")
	return append(args, argv...)
}

// asyArgs is asy's command line for t. An interactive asy gets -q (no
// welcome banner) and the prompt token, which the forwarder removes from
// stdout and takes as "the previous command is done".
func (r *Runner) asyArgs(t Task, token string) []string {
	args := []string{r.tools.asy, "-noV", "-safe", "-noglobalread",
		"-o", outputName, "-f", t.Format}
	args = append(args, r.renderArgs()...)
	if t.Format == FormatHTML {
		// asygl, the WebGL viewer, inlined from /usr/share/asymptote
		// rather than loaded from the internet when the page is viewed.
		args = append(args, "-offline")
	}
	if t.Verbosity > 0 {
		args = append(args, "-"+strings.Repeat("v", t.Verbosity))
	}
	if t.Interactive {
		return append(args, "-q", "-prompt", token)
	}
	return append(args, "--", mainFile(t))
}

// command builds the process of one run.
//
// In the sandbox: bwrap → prlimit (sets the rlimits, execs) → sh, the
// sandbox's PID 1 (--as-pid-1), which starts the task's virtual display
// if it may render 3D (display.go), waits for asy and exits with its status → stdbuf -oL
// (execs) → asy. sh rather than bubblewrap's own init as PID 1:
// bubblewrap's outer process exits as soon as its init reports asy's exit,
// without reaping the init, which is then left to the host's PID 1 to
// reap; with --as-pid-1 the outer bwrap reaps PID 1 itself, so when bwrap
// has exited the whole tree is gone and reaped. A shell rather than asy
// itself as PID 1: PID 1 ignores signals it has no handler for, which
// would change how asy dies of SIGABRT, SIGXCPU or SIGXFSZ.
//
// stdbuf -oL makes asy's stdout line-buffered (it is a pipe, and asy would
// hold back up to 4 KiB): a web user sees each write() as it happens, and
// sees it even when the time limit kills asy. stdbuf adds LD_PRELOAD and
// _STDBUF_O to asy's environment for that.
//
// In insecure mode: prlimit → sh (with the display) → stdbuf → asy in the
// work directory, leading its own process group.
//
// mounts are the task's bubblewrap mounts besides the work directory; x11
// says whether they include a spare display (spareMount).
func (r *Runner) command(dir *workDir, t Task, token string, x11 bool, mounts []string) *exec.Cmd {
	asy := append([]string{r.tools.stdbuf, "-oL"}, r.asyArgs(t, token)...)
	if r.insecure {
		argv := r.limits.prlimitArgs(r.tools.prlimit, false)
		argv = append(argv, r.wrapCommand(filepath.Join(dir.path, homeName), t, false, asy)...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir.path
		cmd.Env = sandboxEnv(filepath.Join(dir.path, homeName))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	argv := r.limits.prlimitArgs(r.tools.prlimit, true)
	argv = append(argv, r.wrapCommand("/tmp", t, x11, asy)...)
	return r.execBwrap(r.bwrapArgs(dir.path, mounts, argv))
}

// bwrapCommand runs argv in a sandbox on workDir, with mounts besides it.
func (r *Runner) bwrapCommand(workDir string, mounts, argv []string) *exec.Cmd {
	return r.execBwrap(r.bwrapArgs(workDir, mounts, argv))
}

// spareCommand runs a spare display on the host directory socketDir.
func (r *Runner) spareCommand(socketDir string) *exec.Cmd {
	return r.execBwrap(r.spareArgs(socketDir))
}

// execBwrap is the bubblewrap command line args as a command. When the
// server is root, bubblewrap itself starts as the unprivileged sandbox
// uid, so the job is that uid on the host too (not root mapped into a
// user namespace).
func (r *Runner) execBwrap(args []string) *exec.Cmd {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if r.asRoot {
		cmd.SysProcAttr.Credential = &syscall.Credential{
			Uid: uint32(r.uid), Gid: uint32(r.gid), Groups: []uint32{},
		}
	}
	return cmd
}

// underUsr resolves path and requires it under /usr, so that the same path
// works inside the sandbox.
func underUsr(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	if !strings.HasPrefix(real, "/usr/") {
		return "", fmt.Errorf("%s is %s, outside /usr, and not visible inside the sandbox", path, real)
	}
	return path, nil
}
