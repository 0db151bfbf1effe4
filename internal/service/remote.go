package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// remoteBackend runs tasks on a remote `usher backend` over seed 001's
// backend protocol, one connection per task.
type remoteBackend struct {
	url  string
	lost func() // called when the connection breaks before `complete`
}

// busyRetry is how long Start keeps trying a backend that answers "busy":
// the task before may still be closing its connection.
const busyRetry = 2 * time.Second

// Start dials the backend, sends the task's files and options and `run`.
func (b *remoteBackend) Start(ctx context.Context, t sandbox.Task, sink sandbox.Sink) (asyqueue.Execution, error) {
	conn, err := b.dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := sendTask(ctx, conn, t); err != nil {
		conn.WebSocket().CloseNow()
		return nil, fmt.Errorf("backend %s: %w", b.url, err)
	}
	e := &remoteExecution{conn: conn, ctx: ctx, done: make(chan struct{}), lost: b.lost}
	go e.relay(sink)
	return e, nil
}

func (b *remoteBackend) dial(ctx context.Context) (*wire.Conn, error) {
	deadline := time.Now().Add(busyRetry)
	for delay := 20 * time.Millisecond; ; delay *= 2 {
		ws, resp, err := websocket.Dial(ctx, b.url, nil)
		if err == nil {
			return wire.NewConn(ws, 0, "result", "output", "complete"), nil
		}
		busy := resp != nil && resp.StatusCode == http.StatusServiceUnavailable
		if !busy || time.Now().Add(delay).After(deadline) {
			return nil, fmt.Errorf("backend %s: %w", b.url, err)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

type addMessage struct {
	Filename string `json:"filename"`
	Main     bool   `json:"main"`
}

type optionsMessage struct {
	Interactive bool   `json:"interactive,omitempty"`
	Timeout     int64  `json:"timeout,omitempty"`
	Format      string `json:"format"`
	Stderr      string `json:"stderr"`
	Verbosity   int    `json:"verbosity"`
}

func sendTask(ctx context.Context, conn *wire.Conn, t sandbox.Task) error {
	for _, f := range t.Files {
		if err := conn.SendPayload(ctx, "add", addMessage{Filename: f.Name, Main: f.Main}, f.Data); err != nil {
			return err
		}
	}
	opts := optionsMessage{Interactive: t.Interactive, Timeout: t.Timeout.Milliseconds(), Format: t.Format, Stderr: "stdout", Verbosity: t.Verbosity}
	if t.SeparateStderr {
		opts.Stderr = "separate"
	}
	if err := conn.Send(ctx, "options", opts); err != nil {
		return err
	}
	return conn.Send(ctx, "run", nil)
}

// remoteExecution is a task running on a remote backend.
type remoteExecution struct {
	conn *wire.Conn
	ctx  context.Context
	lost func()

	done    chan struct{}
	outcome sandbox.Outcome
}

// Shorten sends `options {timeout}`.
func (e *remoteExecution) Shorten(timeout time.Duration) {
	_ = e.conn.Send(e.ctx, "options", map[string]int64{"timeout": timeout.Milliseconds()})
}

// Input sends `input` and its bytes.
func (e *remoteExecution) Input(data []byte) error {
	return e.conn.SendPayload(e.ctx, "input", nil, data)
}

// Wait returns the backend's `complete` as an Outcome.
func (e *remoteExecution) Wait() sandbox.Outcome {
	<-e.done
	return e.outcome
}

type completeMessage struct {
	Success *bool   `json:"success"`
	Error   *string `json:"error"`
	Time    *int64  `json:"time"`
}

// relay passes the backend's messages to sink until `complete`.
func (e *remoteExecution) relay(sink sandbox.Sink) {
	defer close(e.done)
	defer e.conn.WebSocket().CloseNow()
	out, err := e.read(sink)
	switch {
	case err == nil:
		e.outcome = out
	case e.ctx.Err() != nil:
		e.outcome = sandbox.Outcome{Error: "Execution aborted"}
	default:
		e.outcome = sandbox.Outcome{Error: "Backend went away during the task"}
		if e.lost != nil {
			e.lost()
		}
	}
}

func (e *remoteExecution) read(sink sandbox.Sink) (sandbox.Outcome, error) {
	for {
		h, err := e.conn.ReadHeader(e.ctx)
		if err != nil {
			return sandbox.Outcome{}, err
		}
		if h.Verb == "complete" {
			var c completeMessage
			if err := wire.Decode(h, &c, "field"); err != nil || c.Success == nil {
				return sandbox.Outcome{}, fmt.Errorf("bad complete from backend: %v", err)
			}
			out := sandbox.Outcome{Success: *c.Success}
			if c.Error != nil {
				out.Error = *c.Error
			}
			if c.Time != nil {
				out.Time = time.Duration(*c.Time) * time.Millisecond
			}
			return out, nil
		}
		if err := e.forward(h, sink); err != nil {
			return sandbox.Outcome{}, err
		}
	}
}

type labelMessage struct {
	Stream *string `json:"stream"`
	Format *string `json:"format"`
}

func (e *remoteExecution) forward(h wire.Header, sink sandbox.Sink) error {
	var l labelMessage
	if err := wire.Decode(h, &l, "field"); err != nil {
		return err
	}
	data, err := e.conn.ReadPayload(e.ctx, h, h.Verb, 64<<20)
	if err != nil {
		return err
	}
	switch {
	case h.Verb == "output" && l.Stream != nil:
		return sink.Output(*l.Stream, data)
	case h.Verb == "result" && l.Format != nil:
		return sink.Result(*l.Format, data)
	}
	return errors.New("backend sent " + h.Verb + " without its label")
}

// watchRemote keeps a remote backend in the pool while it answers: it
// joins when its health endpoint answers, leaves when a task's connection
// breaks, and joins again when it answers again.
func watchRemote(ctx context.Context, d *asyqueue.Dispatcher, url string, log *slog.Logger) {
	lost := make(chan struct{}, 1)
	b := &remoteBackend{url: url, lost: func() {
		select {
		case lost <- struct{}{}:
		default:
		}
	}}
	for {
		if !waitHealthy(ctx, url) {
			return
		}
		if err := d.AddBackend(url, b); err != nil {
			log.Error("remote backend not added", "url", url, "err", err)
			return
		}
		log.Info("remote backend joined", "url", url)
		select {
		case <-ctx.Done():
			return
		case <-lost:
		}
		log.Warn("remote backend lost", "url", url)
		if err := d.RemoveBackend(url); err != nil {
			log.Error("remote backend not removed", "url", url, "err", err)
		}
	}
}

// waitHealthy polls the backend's /healthz with backoff until it answers
// 200; false when ctx ends first.
func waitHealthy(ctx context.Context, url string) bool {
	health := strings.Replace(strings.TrimSuffix(url, "/"), "ws", "http", 1) + "/healthz"
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return false
		}
	}
}
