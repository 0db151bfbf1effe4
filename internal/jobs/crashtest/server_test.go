package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// server runs `usher serve` as a child process on one data file, and
// restarts it on the same file after a kill. Each start listens on a port
// of its own (127.0.0.1:0); URL says where the current one listens.
type server struct {
	bin, data, token string
	lease            time.Duration

	url    atomic.Pointer[string] // "" while no server is up
	log    *serverLog
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd ended
	starts int
}

func newServer(bin, data, token string, lease time.Duration) *server {
	s := &server{bin: bin, data: data, token: token, lease: lease, log: &serverLog{}}
	s.url.Store(new(string))
	return s
}

// URL is the base URL of the running server, or "" between a kill and
// the next start.
func (s *server) URL() string { return *s.url.Load() }

// start runs the server and returns once GET /livez answers.
func (s *server) start(ctx context.Context) error {
	s.starts++
	addr := make(chan string, 1)
	cmd := exec.Command(s.bin, "serve", "--data", s.data, "--listen", "127.0.0.1:0", "--backends", "0",
		"--admin-token", s.token, "--agent-lease", s.lease.String(), "--shutdown-grace", "10s")
	cmd.Stderr = s.log.writer(s.starts, addr)
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting usher serve: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	select {
	case a := <-addr:
		u := "http://" + a
		if err := waitLive(ctx, u, exited); err != nil {
			return err
		}
		s.url.Store(&u)
		return nil
	case <-exited:
		return fmt.Errorf("usher serve (start %d) exited at once: %s", s.starts, cmd.ProcessState)
	case <-ctx.Done():
		return fmt.Errorf("waiting for usher serve to listen: %w", ctx.Err())
	}
}

// waitLive polls GET /livez until it answers 200.
func waitLive(ctx context.Context, base string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/livez", nil)
		if err != nil {
			return fmt.Errorf("livez request: %w", err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("usher serve exited before /livez answered")
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s/livez: %w", base, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// kill ends the server with SIGKILL and waits until it is gone.
func (s *server) kill() error {
	s.url.Store(new(string))
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL usher serve: %w", err)
	}
	<-s.exited
	return nil
}

// stop ends the server with SIGTERM and checks that it exited cleanly.
func (s *server) stop() error {
	s.url.Store(new(string))
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM usher serve: %w", err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("usher serve did not exit within 30s of SIGTERM")
	}
	if !s.cmd.ProcessState.Success() {
		return fmt.Errorf("usher serve after SIGTERM: %s", s.cmd.ProcessState)
	}
	return nil
}

// close kills a server still running (test cleanup).
func (s *server) close() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
	default:
		_ = s.kill()
	}
}

// serverLog keeps what every start of the server wrote, and finds the
// address each one listens on.
type serverLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

var listenLine = regexp.MustCompile(`msg="usher serving" addr=(\S+)`)

// writer is the stderr of one start; it sends the listen address on addr.
func (l *serverLog) writer(start int, addr chan<- string) *logWriter {
	return &logWriter{log: l, prefix: fmt.Sprintf("[start %d] ", start), addr: addr}
}

// tail returns the last n bytes of the log.
func (l *serverLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

type logWriter struct {
	log     *serverLog
	prefix  string
	addr    chan<- string
	partial []byte
}

// Write splits output into lines, prefixes them with the start and looks
// for the listen address.
func (w *logWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.partial[:i+1])
		w.partial = w.partial[i+1:]
		if m := listenLine.FindStringSubmatch(line); m != nil && w.addr != nil {
			w.addr <- m[1]
			w.addr = nil
		}
		w.log.mu.Lock()
		w.log.buf.WriteString(w.prefix + line)
		w.log.mu.Unlock()
	}
}

// disrupt kills the server and starts it again on the same file.
func (s *server) disrupt(ctx context.Context, _ *rand.Rand) (string, error) {
	if err := s.kill(); err != nil {
		return "server", err
	}
	return "server", s.start(ctx)
}

// logTail returns the last n bytes of the server's log.
func (s *server) logTail(n int) string { return s.log.tail(n) }
