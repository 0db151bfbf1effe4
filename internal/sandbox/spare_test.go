package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/usherhq/usher/internal/testwait"
)

// png3D is a 3D figure to png.
func png3D() Task {
	task := mainTask(figures3D[0].src)
	task.Format = FormatPNG
	return task
}

// render3DTask runs a 3D png task on r and checks that it rendered.
func render3DTask(t *testing.T, r *Runner) *Run {
	t.Helper()
	run, s := start(t, context.Background(), r, png3D())
	o := run.Wait()
	assertGone(t, run)
	wantOutcome(t, o, true, "", s)
	if s.ImageCount() != 1 || !HasMagic(FormatPNG, s.Image(0)) {
		t.Fatalf("%d images", s.ImageCount())
	}
	checkRendered(t, FormatPNG, s.Image(0))
	return run
}

// readySpare waits for r's next spare display to be ready and returns it.
func readySpare(t *testing.T, r *Runner) *spare {
	t.Helper()
	if !r.spares.waitIdle() {
		t.Fatal("no spare display became ready")
	}
	r.spares.mu.Lock()
	defer r.spares.mu.Unlock()
	return r.spares.idle[0]
}

// assertSpareGone checks that a spare's Xvfb and its directory are gone.
func assertSpareGone(t *testing.T, sp *spare) {
	t.Helper()
	if !isClosed(sp.dead) {
		t.Error("the spare display's sandbox is still there")
	}
	if _, err := os.Stat(sp.dir); !os.IsNotExist(err) {
		t.Errorf("spare display directory %s still there (%v)", sp.dir, err)
	}
}

// The first 3D task of a Runner starts its own display; when it ends, a
// spare starts, which the next 3D task gets and renders on. Each task gets
// a fresh X server: the previous one is gone before the next task starts,
// and the next has another Xvfb process and socket directory. A 2D task
// leaves the spare alone.
func TestSpareDisplay(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	if run := render3DTask(t, r); run.spare != nil {
		t.Fatal("the first 3D task got a spare display: none was started yet")
	}
	var prev *spare
	for i := range 2 {
		sp := readySpare(t, r)
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(sp.pid) + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "Xvfb" {
			t.Fatalf("the spare's PID 1 %d is %q (%v), not Xvfb", sp.pid, comm, err)
		}
		if i == 1 {
			checkNextTask(t, r) // 2D: takes no display
			if got := readySpare(t, r); got != sp {
				t.Fatal("a 2D task changed the spare display")
			}
		}
		run := render3DTask(t, r)
		if run.spare != sp || sp.socket == 0 {
			t.Fatalf("task %d did not render on the ready spare display", i+2)
		}
		assertSpareGone(t, sp)
		if prev != nil && (prev.pid == sp.pid || prev.dir == sp.dir) {
			t.Fatalf("two tasks got the same X server: pid %d, %s", sp.pid, sp.dir)
		}
		prev = sp
	}
}

// A spare display that died before a task (killed from outside) is not
// used: the task starts its own and renders, and a new spare follows.
func TestSpareDisplayKilledFallsBack(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	render3DTask(t, r)
	sp := readySpare(t, r)
	if err := syscall.Kill(sp.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.Receive(t, 30*time.Second, sp.dead, "the runner noticing the killed spare")
	if run := render3DTask(t, r); run.spare != nil {
		t.Fatal("the task got the dead spare display")
	}
	assertSpareGone(t, sp)
	if next := readySpare(t, r); next == sp {
		t.Fatal("no new spare display after the dead one")
	}
}

// Close kills the idle spare display and the one a running task holds,
// starts no more and removes the shader cache template; tasks after Close
// start their own displays, with an empty shader cache.
func TestCloseKillsSpareDisplays(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	template := filepath.Dir(r.template.cacheDir())
	render3DTask(t, r)
	held := readySpare(t, r)
	task := mainTask(`import three; size(2cm); draw(unitsphere); shipout(); while(true) {}`)
	task.Format, task.Timeout = FormatPNG, 30*time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, _ := start(t, ctx, r, task)
	if run.spare != held {
		t.Fatal("the running task did not get the spare display")
	}
	r.spares.refill() // an idle spare besides the held one
	idle := readySpare(t, r)
	fds := []int{pidfd(t, held.pid), pidfd(t, idle.pid)}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for i, fd := range fds {
		polled := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(polled, 0); n != 1 || err != nil {
			t.Errorf("spare display %d (pid %d) survives Close (%v)", i, []int{held.pid, idle.pid}[i], err)
		}
		unix.Close(fd)
	}
	assertSpareGone(t, idle)
	cancel()
	run.Wait()
	assertGone(t, run)
	assertSpareGone(t, held)
	if _, err := os.Stat(template); !os.IsNotExist(err) || r.template.cacheDir() != "" {
		t.Fatalf("the shader cache template %s survives Close (%v)", template, err)
	}
	if run := render3DTask(t, r); run.spare != nil || run.mounts != nil {
		t.Fatal("a task after Close got a spare display or the shader cache template")
	}
	if r.spares.waitIdle() {
		t.Fatal("a spare display started after Close")
	}
}

// pidfd opens a pidfd on pid.
func pidfd(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of %d: %v", pid, err)
	}
	return fd
}
