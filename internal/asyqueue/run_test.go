package asyqueue

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
	"github.com/usherhq/usher/internal/testwait"
)

// clientSide is the client's side of a run: what the session sent it.
type clientSide struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *clientSide) Send(context.Context, string, any) error { return nil }

func (c *clientSide) SendPayload(_ context.Context, verb string, _ any, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if verb == "output" {
		c.out.Write(payload)
	}
	return nil
}

func (c *clientSide) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// Input an interactive client sends between run and the start (a race
// the queue cannot be made to lose on demand, so the run is driven by
// hand, on a real sandboxed asy) is kept and fed at the start; more than
// MaxInput of it is refused.
func TestInputBeforeStartIsKept(t *testing.T) {
	runner, err := sandbox.New(sandbox.Config{WorkRoot: sandboxtest.WorkRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close() })
	srv := NewServer(t.Context(), Config{MaxInput: 64}, nil, nil, nil, nil)
	peer := &clientSide{}
	r := &run{session: &session{srv: srv, out: peer}, task: sandbox.Task{Interactive: true, Format: sandbox.FormatSVG}}
	r.runCtx, r.abort = context.WithCancel(t.Context())
	defer r.abort()
	if err := r.input([]byte("write(1+2);\n")); err != nil {
		t.Fatalf("input before the start: %v", err)
	}
	if err := r.input(bytes.Repeat([]byte(" "), 60)); err == nil || !strings.Contains(err.Error(), "at most 64 bytes before the task starts") {
		t.Fatalf("input over MaxInput before the start: %v", err)
	}
	if err := r.start(t.Context(), Start{Backend: backend.Sandbox(runner), BackendID: "local"}); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Until(30*time.Second, func() bool { return strings.Contains(peer.text(), "3\n") }, "the answer"); err != nil {
		t.Fatalf("%v: output %q", err, peer.text())
	}
	r.stop()
}
