package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Spare displays take Xvfb's start off a 3D task's critical path without
// sharing an X server between tasks. After a task with a display ends, the
// Runner starts a spare: an Xvfb alone in a sandbox of its own (no network,
// no host files, its own /tmp, the same rlimits as a task), listening only
// on /tmp/.X11-unix/X0, which is a host directory that nothing else
// mounts. The next task that needs a display takes it if it is ready: the
// socket directory is moved into that task's work directory (so its size
// counts against the task's Limits.Disk and it goes with the directory)
// and bound read-only at /tmp/.X11-unix in the task's sandbox, the only
// sandbox that ever sees it. When the task ends its Xvfb is killed and
// the next spare starts. A spare serves one task and dies with it, so no
// X state passes from a task to another (docs/sandbox.md). Without a
// ready spare, a task starts its own Xvfb as before (display.go).

const (
	// spareSocketName is the socket directory's name in a task's work
	// directory; task files end in one of Extensions, so it cannot clash.
	spareSocketName = ".x11"
	// spareDisplayFD is the fd on which a spare's Xvfb writes its display
	// number once ready (ExtraFiles[1]; the status fd is 3).
	spareDisplayFD = statusFD + 1
	// spareLogMax bounds the Xvfb messages a spare keeps for the log.
	spareLogMax = 4 * kiB
)

// xvfbArgs are Xvfb's options after the display, the same for a spare and
// for a task's own Xvfb: no TCP, no abstract socket (the only socket is
// /tmp/.X11-unix/X<n>), no reset, asy's screen.
var xvfbArgs = []string{"-nolisten", "tcp", "-nolisten", "local", "-noreset", "-screen", "0", displayScreen}

// spare is one spare display: an Xvfb in its own sandbox.
type spare struct {
	dir   string        // host directory made for it; its socket directory is dir/x11 until taken
	ready chan struct{} // closed when Xvfb wrote its display number
	dead  chan struct{} // closed when its sandbox is gone (or never started)
	log   limitedBuffer // Xvfb's stderr, the first spareLogMax bytes

	mu     sync.Mutex
	proc   *process // nil until started
	killed bool

	// pid is Xvfb's host pid (the sandbox's PID 1) and socket the inode
	// of its socket when a task took it (tests).
	pid    int
	socket uint64
}

// socketDir is the host path of the spare's socket directory before a task
// takes it.
func (sp *spare) socketDir() string { return filepath.Join(sp.dir, "x11") }

// kill ends the spare's sandbox (at once if it is still starting). Safe to
// call repeatedly; <-sp.dead waits for the end.
func (sp *spare) kill() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.killed = true
	if sp.proc != nil {
		sp.proc.kill()
	}
}

// usable reports whether the spare is ready and alive.
func (sp *spare) usable() bool {
	select {
	case <-sp.dead:
		return false
	default:
	}
	select {
	case <-sp.ready:
		return true
	default:
		return false
	}
}

// spares is a Runner's pool of spare displays.
type spares struct {
	r    *Runner
	want int // spares kept ready

	mu     sync.Mutex
	idle   []*spare        // starting or ready, not taken
	inUse  map[*spare]bool // taken by a running task
	closed bool            // Close was called: start no more
	wg     sync.WaitGroup  // the spares' goroutines
}

func newSpares(r *Runner, want int) *spares {
	return &spares{r: r, want: want, inUse: map[*spare]bool{}}
}

// take returns a ready spare, now in use, or nil. Dead spares it meets are
// dropped.
func (p *spares) take() *spare {
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := p.idle[:0]
	var got *spare
	for _, sp := range p.idle {
		switch {
		case got == nil && sp.usable():
			got = sp
		case isClosed(sp.dead):
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.discard(sp)
			}()
		default:
			keep = append(keep, sp)
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	if got != nil {
		p.inUse[got] = true
	}
	return got
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// release kills a spare a task used and removes what is left of its
// directory.
func (p *spares) release(sp *spare) {
	p.mu.Lock()
	delete(p.inUse, sp)
	p.mu.Unlock()
	p.discard(sp)
}

// discard kills sp, waits for its sandbox to be gone and removes its
// directory.
func (p *spares) discard(sp *spare) {
	sp.kill()
	<-sp.dead
	if err := os.RemoveAll(sp.dir); err != nil {
		p.r.log.Error("sandbox: spare display directory left behind", "dir", sp.dir, "err", err)
	}
}

// refill starts spares in the background until want are idle, unless the
// pool is closed.
func (p *spares) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.idle) < p.want {
		sp := &spare{ready: make(chan struct{}), dead: make(chan struct{})}
		sp.log.max = spareLogMax
		p.idle = append(p.idle, sp)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.run(sp)
		}()
	}
}

// run starts sp's sandbox and waits for its end. A spare that fails or
// dies while idle is dropped by the next take; the next task with a
// display starts a new one when it ends.
func (p *spares) run(sp *spare) {
	defer close(sp.dead)
	proc, displayFD, err := p.start(sp)
	if err != nil {
		p.r.log.Warn("sandbox: cannot start a spare display; tasks start their own", "err", err)
		return
	}
	sp.mu.Lock()
	sp.proc, sp.pid = proc, proc.initPid
	if sp.killed {
		proc.kill()
	}
	sp.mu.Unlock()
	go awaitDisplay(displayFD, sp.ready)
	proc.wait()
	sp.mu.Lock()
	killed := sp.killed
	sp.mu.Unlock()
	if !isClosed(sp.ready) && !killed {
		p.r.log.Warn("sandbox: a spare display did not start; tasks start their own",
			"code", proc.code, "xvfb", strings.TrimSpace(sp.log.String()))
	}
}

// awaitDisplay closes ready when Xvfb writes its display number on f (it
// does once it serves clients), then closes f. If Xvfb dies first, the
// read ends empty.
func awaitDisplay(f *os.File, ready chan struct{}) {
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if _, convErr := strconv.Atoi(strings.TrimSpace(line)); err == nil && convErr == nil {
		close(ready)
	}
}

// start creates sp's directories and starts its sandbox; it returns the
// process and the read end of Xvfb's -displayfd pipe.
func (p *spares) start(sp *spare) (*process, *os.File, error) {
	r := p.r
	dir, err := os.MkdirTemp(r.workRoot, "usher-x-")
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: spare display directory: %w", err)
	}
	sp.dir = dir
	if err := r.mkdirOwned(sp.socketDir()); err != nil {
		return nil, nil, err
	}
	if r.asRoot {
		if err := os.Chown(dir, r.uid, r.gid); err != nil {
			return nil, nil, fmt.Errorf("sandbox: spare display directory: %w", err)
		}
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: spare display pipe: %w", err)
	}
	cmd := r.spareCommand(sp.socketDir())
	cmd.ExtraFiles = []*os.File{wr}
	cmd.Stdout, cmd.Stderr = nil, &sp.log
	proc, err := startProcess(cmd, true)
	wr.Close()
	if err != nil {
		rd.Close()
		return nil, nil, err
	}
	return proc, rd, nil
}

// mkdirOwned creates dir 0700, owned by the sandbox uid.
func (r *Runner) mkdirOwned(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if r.asRoot {
		if err := os.Chown(dir, r.uid, r.gid); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	return nil
}

// hand moves sp's socket directory into the work directory d, where the
// task's sandbox binds it (bwrap.go), and notes its socket's inode.
func (sp *spare) hand(d *workDir) error {
	if err := unix.Renameat(unix.AT_FDCWD, sp.socketDir(), d.fd, spareSocketName); err != nil {
		return fmt.Errorf("sandbox: move the spare display's socket directory: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, spareSocketName+"/X0", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("sandbox: the spare display's socket: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return errors.New("sandbox: the spare display's X0 is not a socket")
	}
	sp.socket = st.Ino
	return nil
}

// close kills every spare, those of running tasks too, and waits until
// their sandboxes are gone.
func (p *spares) close() {
	p.mu.Lock()
	p.closed = true
	all := p.idle
	p.idle = nil
	for sp := range p.inUse {
		all = append(all, sp)
	}
	p.mu.Unlock()
	for _, sp := range all {
		p.discard(sp)
	}
	p.wg.Wait()
}

// waitIdle waits until the pool's first idle spare is ready (true) or
// dead, or the pool has none (tests and benchmarks).
func (p *spares) waitIdle() bool {
	p.mu.Lock()
	var sp *spare
	if len(p.idle) > 0 {
		sp = p.idle[0]
	}
	p.mu.Unlock()
	if sp == nil {
		return false
	}
	select {
	case <-sp.ready:
		return !isClosed(sp.dead)
	case <-sp.dead:
		return false
	}
}

// limitedBuffer keeps the first max bytes written to it and drops the
// rest; safe for the one writer exec.Cmd runs and a reader after Wait.
type limitedBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
