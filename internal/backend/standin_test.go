package backend

// STAND-IN, to be deleted when the real runner (package sandbox) lands:
// standInAsy runs the real /usr/bin/asy WITHOUT ANY SANDBOX, with the
// invocation, limits and error texts of seed 001, so that the protocol tests
// exercise real asy output before sandbox.Runner exists. newTestRunner in
// helpers_test.go is the one place that chooses it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
)

// The real sandbox.CheckFileName panics until the runner lands.
func init() { checkFileName = standInCheckFileName }

type standInAsy struct {
	maxTimeout  time.Duration
	outputLimit int64
}

// standInCheckFileName is a STAND-IN for sandbox.CheckFileName with the
// rules of its doc comment (the texts of the real one may differ; tests
// compare against checkFileName's own text).
func standInCheckFileName(name string) error {
	switch {
	case !strings.HasSuffix(name, ".asy"):
		return fmt.Errorf("file name %q does not end in .asy", name)
	case len(name) > 255:
		return fmt.Errorf("file name longer than 255 bytes")
	case strings.ContainsAny(name, `/\`) || strings.Contains(name, ".."):
		return fmt.Errorf("file name %q contains a path", name)
	}
	for _, c := range name {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("file name %q contains a control character", name)
		}
	}
	return nil
}

type standInRun struct {
	cmd    *exec.Cmd
	dir    string
	format string
	stdin  io.WriteCloser
	sink   sandbox.Sink
	sinkMu sync.Mutex
	output int64
	start  time.Time
	reads  sync.WaitGroup
	limit  int64

	mu       sync.Mutex
	timeout  time.Duration
	timer    *time.Timer
	killedBy string

	waitOnce sync.Once
	outcome  sandbox.Outcome
	exited   chan struct{}
}

func (s standInAsy) Start(ctx context.Context, t sandbox.Task, sink sandbox.Sink) (Execution, error) {
	dir, err := os.MkdirTemp("", "standin-asy-")
	if err != nil {
		return nil, err
	}
	main := ""
	for _, f := range t.Files {
		if f.Main {
			main = f.Name
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	r := &standInRun{dir: dir, format: t.Format, sink: sink, limit: s.outputLimit, exited: make(chan struct{})}
	if err := r.launch(t, main); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r.timeout = s.maxTimeout
	if t.Timeout > 0 && t.Timeout < r.timeout {
		r.timeout = t.Timeout
	}
	r.timer = time.AfterFunc(r.timeout, func() { r.kill("time") })
	go func() {
		select {
		case <-ctx.Done():
			r.kill("abort")
		case <-r.exited:
		}
	}()
	return r, nil
}

func (r *standInRun) launch(t sandbox.Task, main string) error {
	args := []string{"-noV", "-safe", "-noglobalread", "-f", t.Format, "-o", filepath.Join(r.dir, "out")}
	if t.Verbosity > 0 {
		args = append(args, "-"+strings.Repeat("v", t.Verbosity))
	}
	if !t.Interactive {
		args = append(args, main)
	}
	r.cmd = exec.Command("/usr/bin/asy", args...)
	r.cmd.Dir = r.dir
	r.cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + r.dir, "ASYMPTOTE_HOME=" + filepath.Join(r.dir, ".asy")}
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if t.Interactive {
		in, err := r.cmd.StdinPipe()
		if err != nil {
			return err
		}
		r.stdin = in
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	r.cmd.Stdout, r.cmd.Stderr = outW, outW
	var errR *os.File
	if t.SeparateStderr {
		var errW *os.File
		if errR, errW, err = os.Pipe(); err != nil {
			return err
		}
		r.cmd.Stderr = errW
		defer errW.Close()
	}
	defer outW.Close()
	r.start = time.Now()
	if err := r.cmd.Start(); err != nil {
		return err
	}
	r.forward(outR, sandbox.Stdout)
	if errR != nil {
		r.forward(errR, sandbox.Stderr)
	}
	return nil
}

func (r *standInRun) forward(f *os.File, stream string) {
	r.reads.Go(func() {
		defer f.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 && !r.deliver(stream, buf[:n]) {
				return
			}
			if err != nil {
				return
			}
		}
	})
}

func (r *standInRun) deliver(stream string, data []byte) bool {
	r.sinkMu.Lock()
	defer r.sinkMu.Unlock()
	r.output += int64(len(data))
	if r.output > r.limit {
		r.kill("output")
		return false
	}
	if err := r.sink.Output(stream, append([]byte(nil), data...)); err != nil {
		r.kill("abort")
		return false
	}
	return true
}

func (r *standInRun) kill(why string) {
	r.mu.Lock()
	if r.killedBy == "" {
		r.killedBy = why
	}
	r.mu.Unlock()
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
}

func (r *standInRun) Shorten(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d >= r.timeout {
		return
	}
	r.timeout = d
	r.timer.Reset(max(0, time.Until(r.start.Add(d))))
}

func (r *standInRun) Input(data []byte) error {
	if r.stdin == nil {
		return errors.New("not interactive")
	}
	_, err := r.stdin.Write(data)
	return err
}

func (r *standInRun) Wait() sandbox.Outcome {
	r.waitOnce.Do(func() {
		r.reads.Wait()
		err := r.cmd.Wait()
		close(r.exited)
		r.timer.Stop()
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		r.outcome = r.conclude(err)
		os.RemoveAll(r.dir)
	})
	return r.outcome
}

func (r *standInRun) conclude(err error) sandbox.Outcome {
	out := sandbox.Outcome{Time: time.Since(r.start)}
	image, imgErr := os.ReadFile(filepath.Join(r.dir, "out."+r.format))
	if imgErr == nil {
		r.sinkMu.Lock()
		_ = r.sink.Result(r.format, image)
		r.sinkMu.Unlock()
	}
	r.mu.Lock()
	killedBy, timeout := r.killedBy, r.timeout
	r.mu.Unlock()
	switch {
	case killedBy == "time":
		out.Error = fmt.Sprintf("Execution aborted due to the time limit (%dms)", timeout.Milliseconds())
	case killedBy == "output":
		out.Error = fmt.Sprintf("Execution aborted due to the output limit (%dB)", r.limit)
	case killedBy != "":
		out.Error = "Execution aborted"
	case err != nil:
		out.Error = fmt.Sprintf("Execution failed with code %d", r.cmd.ProcessState.ExitCode())
	case imgErr != nil:
		out.Error = "No image output"
	default:
		out.Success = true
	}
	return out
}
