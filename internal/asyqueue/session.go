package asyqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// session serves one task: for a WebSocket client, collect, then cache or
// queue and run; for an HTTP render (render.go), cache or queue and run.
type session struct {
	srv    *Server
	conn   *wire.Conn // the client's connection; nil for an HTTP render
	out    peer       // where the task's messages go
	client string
	// left, for an HTTP render, ends when no caller waits for it any
	// more: the client went away.
	left context.Context
}

// peer receives what a session sends about its task: a WebSocket client's
// connection (*wire.Conn), or the collector of an HTTP render.
type peer interface {
	Send(ctx context.Context, verb string, body any) error
	SendPayload(ctx context.Context, verb string, body any, payload []byte) error
}

func (s *session) serve(ctx context.Context) {
	defer closeWith(s.conn)
	task, err := s.collect(ctx)
	if err != nil {
		s.refuse(ctx, err)
		return
	}
	if !task.Interactive && s.srv.replay(ctx, s.out, task) {
		return
	}
	_ = s.queue(ctx, task) // a denial has been sent
}

// collect runs the collector under the idle limit before `run`: when it
// passes, the client is denied and the connection closed.
func (s *session) collect(ctx context.Context) (sandbox.Task, error) {
	idle := s.srv.cfg.IdleBeforeRun
	timer := time.AfterFunc(idle, func() {
		text := fmt.Sprintf("no \"run\" within %v", idle)
		s.srv.metrics.denied("idle")
		s.srv.d.NoteDenial(text)
		s.send(ctx, "denied", deniedBody{Error: text})
		closeWith(s.conn)
	})
	defer timer.Stop()
	stopWatch := context.AfterFunc(ctx, func() {
		s.send(ctx, "denied", deniedBody{Error: ErrStopped.Error()})
		closeWith(s.conn)
	})
	defer stopWatch()
	c := &collector{srv: s.srv, conn: s.conn, opts: sandbox.Task{Format: sandbox.FormatSVG}}
	// Reads do not follow ctx: cancelling a read closes the connection
	// before the client is told why; stopWatch tells it, then closes.
	return c.collect(context.WithoutCancel(ctx))
}

func (s *session) refuse(ctx context.Context, err error) {
	var d *denial
	if errors.As(err, &d) {
		s.srv.metrics.denied("request")
		s.srv.d.NoteDenial(d.text)
		s.send(ctx, "denied", deniedBody{Error: d.text})
	}
}

// queue takes a slot (at once for an interactive task, through the queue
// otherwise), runs the task and gives the slot back. It returns the
// queue's denial, which it has sent.
func (s *session) queue(ctx context.Context, task sandbox.Task) error {
	queuedAt := time.Now()
	t, err := s.srv.d.Submit(s.client, task)
	if err != nil {
		s.srv.metrics.denied(denialReason(err))
		s.send(ctx, "denied", deniedBody{Error: err.Error()})
		return err
	}
	// The reader of the client's later messages stops only after the slot
	// is released and the connection closed: cancelling a read closes the
	// connection, and a client that sees the close may send its next task.
	readCtx, stopReading := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReading()
	r := &run{session: s, task: task, ticket: t, queuedAt: queuedAt}
	ran := r.follow(ctx, readCtx)
	s.srv.d.Release(t, ran)
	closeWith(s.conn)
	return nil
}

// denialReasonOfText is the reason of a denial the scheduler sent after
// the task was queued (multi-node mode denies interactive tasks so).
func denialReasonOfText(text string) string {
	switch text {
	case ErrQueueFull.Error():
		return "queue_full"
	case ErrNoBackend.Error():
		return "no_backend"
	default:
		return "other"
	}
}

func denialReason(err error) string {
	switch {
	case errors.Is(err, ErrQueueFull):
		return "queue_full"
	case errors.Is(err, ErrNoBackend):
		return "no_backend"
	default:
		return "other"
	}
}

// send writes a header, even after ctx ended (the last message of a task
// aborted by a shutdown still goes out), within writeTimeout. A failure
// means the client is gone, which the reading side notices.
func (s *session) send(ctx context.Context, verb string, body any) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if err := s.out.Send(ctx, verb, body); err != nil {
		s.srv.cfg.Logger.Debug("asy: send failed", "verb", verb, "client", s.client, "err", err)
	}
}

// errRenderLeft ends an HTTP render nobody waits for any more.
var errRenderLeft = errors.New("every caller of the render has gone")

// writeTimeout bounds sending one message to a client that does not read.
const writeTimeout = 10 * time.Second

// inbound is a message a client sent after `run`, or why reading stopped.
type inbound struct {
	data []byte
	err  error
}

// readAfterRun reads `input` messages until the connection ends; anything
// else is a protocol error. An HTTP render sends nothing after `run`; its
// callers leaving is the connection's end.
func (s *session) readAfterRun(ctx context.Context, out chan<- inbound) {
	if s.conn == nil {
		select {
		case <-s.left.Done():
			out <- inbound{err: errRenderLeft}
		case <-ctx.Done():
		}
		return
	}
	for {
		var m inbound
		h, err := s.conn.ReadHeader(ctx)
		switch {
		case err != nil:
			m.err = err
		case h.Verb != "input":
			m.err = &wire.Error{Text: fmt.Sprintf("%q after \"run\"", h.Verb)}
		default:
			m.data, m.err = s.conn.ReadPayload(ctx, h, "input", s.srv.cfg.MaxInput)
		}
		select {
		case out <- m:
		case <-ctx.Done():
			return
		}
		if m.err != nil {
			return
		}
	}
}
