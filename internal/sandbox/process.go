package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// process is the process tree of one run and how it is ended.
//
// With bubblewrap the tree is: bwrap (our child) → sh, PID 1 of the
// sandbox's PID namespace (a new session) → asy → latex, dvisvgm, gs.
// When PID 1 of a PID namespace dies, the kernel kills every other process
// in it, and PID 1 only finishes exiting once all of them are gone.
// bubblewrap reports PID 1's host pid on its JSON status fd and we hold a
// pidfd on it. So ending a run is: SIGKILL to PID 1 through the pidfd; bwrap
// reaps it and exits; we reap bwrap and check the pidfd reports PID 1's
// exit. After that nothing of the task is left, whatever it forked,
// backgrounded or left hanging (the hostile tests check it).
//
// In insecure mode asy itself leads a process group; the group is killed
// before asy is reaped, which catches children that stayed in it.
type process struct {
	cmd     *exec.Cmd
	status  *os.File // bwrap's JSON status, read end; nil in insecure mode
	startAt time.Time

	mu     sync.Mutex
	initFD int // pidfd of the sandbox's PID 1; -1 when unknown or closed
	reaped bool

	initPid int    // host pid of the sandbox's PID 1 (tests)
	pidNS   uint64 // inode of the sandbox's PID namespace (tests)

	exited chan struct{} // closed when the whole tree is gone
	exitAt time.Time
	code   int
}

// bwrapStatus is the first object bubblewrap writes on --json-status-fd.
type bwrapStatus struct {
	ChildPid     int    `json:"child-pid"`
	PidNamespace uint64 `json:"pid-namespace"`
}

// startProcess starts cmd. In sandbox mode it waits until bubblewrap reports
// the sandbox's PID 1 and takes a pidfd on it.
func startProcess(cmd *exec.Cmd, sandboxed bool) (*process, error) {
	p := &process{cmd: cmd, initFD: -1, exited: make(chan struct{})}
	var statusW *os.File
	if sandboxed {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("sandbox: status pipe: %w", err)
		}
		p.status, statusW = r, w
		cmd.ExtraFiles = append([]*os.File{w}, cmd.ExtraFiles...)
	}
	p.startAt = time.Now()
	err := cmd.Start()
	if statusW != nil {
		statusW.Close()
	}
	if err != nil {
		if p.status != nil {
			p.status.Close()
		}
		return nil, fmt.Errorf("sandbox: start %s: %w", cmd.Path, err)
	}
	if sandboxed {
		if err := p.readStatus(); err != nil {
			p.kill()
			p.wait()
			return nil, err
		}
	}
	return p, nil
}

// readStatus reads bubblewrap's first status object and opens a pidfd on
// PID 1, checking that the pid still belongs to bwrap's child.
func (p *process) readStatus() error {
	_ = p.status.SetReadDeadline(time.Now().Add(10 * time.Second))
	var st bwrapStatus
	if err := json.NewDecoder(p.status).Decode(&st); err != nil || st.ChildPid <= 0 {
		return fmt.Errorf("sandbox: bubblewrap did not start the sandbox (status: %v)", err)
	}
	_ = p.status.SetReadDeadline(time.Time{})
	p.initPid, p.pidNS = st.ChildPid, st.PidNamespace
	fd, err := unix.PidfdOpen(st.ChildPid, 0)
	if err != nil {
		return nil // already gone: its namespace is torn down
	}
	if parentPid(st.ChildPid) != p.cmd.Process.Pid {
		_ = unix.Close(fd) // exited and the pid was reused
		return nil
	}
	p.mu.Lock()
	p.initFD = fd
	p.mu.Unlock()
	return nil
}

// parentPid reads the parent of pid from /proc, or -1.
func parentPid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
}

// kill ends the whole tree now. Safe to call at any time, repeatedly.
func (p *process) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.initFD >= 0 {
		// Only PID 1: bwrap then reaps it. Killing bwrap too would leave
		// PID 1 to whoever adopts it.
		_ = unix.PidfdSendSignal(p.initFD, unix.SIGKILL, nil, 0)
		return
	}
	if !p.reaped {
		// Not reaped yet, so the group id (bwrap's or asy's pid) cannot
		// have been reused.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// wait waits for our child to exit, kills what is left of its group before
// reaping it (insecure mode), reaps it, and makes sure the sandbox's PID 1
// is gone. Then it closes exited.
func (p *process) wait() {
	pid := p.cmd.Process.Pid
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	p.exitAt = time.Now()
	p.mu.Lock()
	if p.status == nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	p.reaped = true
	p.mu.Unlock()
	_ = p.cmd.Wait()
	p.code = exitCode(p.cmd.ProcessState)
	p.awaitInit()
	if p.status != nil {
		p.status.Close()
	}
	close(p.exited)
}

// awaitInit makes sure the sandbox's PID 1 has exited, which the kernel
// allows only after every other process of the namespace is gone. bwrap
// normally reaped it already. If bwrap died first (killed from outside),
// PID 1 died with it (--die-with-parent) and was adopted: by us when we are
// a PID 1 or subreaper ourselves, and then we reap it here.
func (p *process) awaitInit() {
	p.mu.Lock()
	fd := p.initFD
	if fd >= 0 {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
	p.mu.Unlock()
	if fd < 0 {
		return
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1)
		if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
			break
		}
	}
	_ = unix.Waitid(unix.P_PIDFD, fd, nil, unix.WEXITED|unix.WNOHANG, nil)
	p.mu.Lock()
	_ = unix.Close(fd)
	p.initFD = -1
	p.mu.Unlock()
}

// exitCode is the exit status, or 128+signal for a killed process, as
// shells and bubblewrap report it.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
