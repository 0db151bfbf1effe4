package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// Remote is a Starter that runs tasks on a remote `usher backend` over
// the backend protocol, one connection per task: the client side of
// this package's protocol, used by the queue server.
type Remote struct {
	// URL is the backend's WebSocket address, ws://host:port/.
	URL string
	// Lost, if set, is called when a task's connection breaks before
	// `complete`: the backend is gone or unreachable.
	Lost func()
	// Attached says the backend already has the task (Redis mode): Start
	// dials and relays, sending nothing.
	Attached bool
}

// GoneText is the outcome of a task whose backend connection broke.
const GoneText = "Backend went away during the task"

// ErrGone reports a backend that went away between being picked for a
// task and taking it: Start returns it (wrapped, with the cause) when the
// dial or the sending of the task fails.
var ErrGone = errors.New(GoneText)

// Start dials the backend, sends the task's files, options and `run`, and
// relays what the backend sends to sink until `complete`.
func (b *Remote) Start(ctx context.Context, t sandbox.Task, sink sandbox.Sink) (Execution, error) {
	ws, _, err := websocket.Dial(ctx, b.URL, nil)
	if err != nil {
		// It was in the pool a moment ago: for the task it went away.
		b.lost(ctx)
		return nil, fmt.Errorf("backend %s: %w: %v", b.URL, ErrGone, err)
	}
	conn := wire.NewConn(ws, 0, Outgoing...)
	if !b.Attached { // attached: the backend took the task from Redis
		if err := sendTask(ctx, conn, t); err != nil {
			ws.CloseNow()
			b.lost(ctx)
			return nil, fmt.Errorf("backend %s: %w: %v", b.URL, ErrGone, err)
		}
	}
	e := &remoteExecution{conn: conn, ctx: ctx, done: make(chan struct{}), lost: b.Lost}
	go e.relay(sink)
	return e, nil
}

type addMessage struct {
	Filename string `json:"filename"`
	Main     bool   `json:"main"`
}

type optionsMessage struct {
	Interactive bool   `json:"interactive,omitempty"`
	Timeout     int64  `json:"timeout,omitempty"`
	Format      string `json:"format,omitempty"`
	Stderr      string `json:"stderr"`
	Verbosity   int    `json:"verbosity"`
}

func sendTask(ctx context.Context, conn *wire.Conn, t sandbox.Task) error {
	for _, f := range t.Files {
		if err := conn.SendPayload(ctx, VerbAdd, addMessage{Filename: f.Name, Main: f.Main}, f.Data); err != nil {
			return err
		}
	}
	opts := optionsMessage{Interactive: t.Interactive, Timeout: t.Timeout.Milliseconds(), Format: t.Format, Stderr: StderrStdout, Verbosity: t.Verbosity}
	if t.SeparateStderr {
		opts.Stderr = StderrSeparate
	}
	if err := conn.Send(ctx, VerbOptions, opts); err != nil {
		return err
	}
	return conn.Send(ctx, VerbRun, nil)
}

// lost reports an unreachable backend, unless the task was only aborted.
func (b *Remote) lost(ctx context.Context) {
	if b.Lost != nil && ctx.Err() == nil {
		b.Lost()
	}
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
	_ = e.conn.Send(e.ctx, VerbOptions, map[string]int64{"timeout": timeout.Milliseconds()})
}

// Input sends `input` and its bytes.
func (e *remoteExecution) Input(data []byte) error {
	return e.conn.SendPayload(e.ctx, VerbInput, nil, data)
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
		e.outcome = sandbox.Outcome{Error: GoneText}
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
		if h.Verb == VerbComplete {
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
	case h.Verb == VerbOutput && l.Stream != nil:
		return sink.Output(*l.Stream, data)
	case h.Verb == VerbResult && l.Format != nil:
		return sink.Result(*l.Format, data)
	}
	return errors.New("backend sent " + h.Verb + " without its label")
}
