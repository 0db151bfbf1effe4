package testbin

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a running usher process whose output (stdout and stderr) the
// test reads line by line.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited

	mu    sync.Mutex
	lines []string
	grew  chan struct{} // closed and replaced when a line arrives
}

// Start runs bin with args until the test ends (then it is killed); name
// prefixes its lines in failure messages.
func Start(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, cmd: exec.Command(bin, args...), done: make(chan struct{}), grew: make(chan struct{})}
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go p.read(r)
	go func() { _ = p.cmd.Wait(); w.Close(); close(p.done) }()
	t.Cleanup(p.Kill)
	return p
}

func (p *Proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p.mu.Lock()
		p.lines = append(p.lines, sc.Text())
		close(p.grew)
		p.grew = make(chan struct{})
		p.mu.Unlock()
	}
}

// WaitFor waits until a line of output matches re and returns its
// submatches; it fails when the process exits or within bound first.
func (p *Proc) WaitFor(re *regexp.Regexp, bound time.Duration) ([]string, error) {
	deadline := time.After(bound)
	seen := 0
	for {
		p.mu.Lock()
		lines, grew := p.lines[seen:], p.grew
		seen = len(p.lines)
		p.mu.Unlock()
		for _, l := range lines {
			if m := re.FindStringSubmatch(l); m != nil {
				return m, nil
			}
		}
		select {
		case <-grew:
		case <-p.done:
			return nil, fmt.Errorf("%s exited (%s) before printing %q:\n%s", p.Name, p.cmd.ProcessState, re, p.Tail(20))
		case <-deadline:
			return nil, fmt.Errorf("%s did not print %q within %v:\n%s", p.Name, re, bound, p.Tail(20))
		}
	}
}

// Tail returns the last n lines of output.
func (p *Proc) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// Output returns every line so far.
func (p *Proc) Output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// Kill ends the process with SIGKILL and waits until it is gone.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop ends the process with SIGTERM and reports how it exited, killing it
// if it is still there after bound.
func (p *Proc) Stop(bound time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(bound):
		p.Kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.Name, bound)
	}
	if !p.cmd.ProcessState.Success() {
		return errors.New(p.Name + ": " + p.cmd.ProcessState.String())
	}
	return nil
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }
