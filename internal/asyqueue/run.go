package asyqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// run follows one task from the queue to its end on a backend.
type run struct {
	*session
	task   sandbox.Task
	ticket *Ticket

	runCtx context.Context // the run's own: cancelled to abort it
	abort  context.CancelFunc
	exec   backend.Execution
	done   chan sandbox.Outcome
	relay  *relay
	told   *told // the last estimate sent, to measure its error
	// early is input that arrived after run but before the backend took
	// the task; it is fed at the start, at most MaxInput bytes in all.
	early [][]byte
	// queuedAt is when the task was queued, to measure its wait.
	queuedAt time.Time
}

type told struct {
	at   time.Time
	wait time.Duration
}

// follow relays queue updates, the run's messages and the client's input
// until the task ends. It reports whether the run went to its own end.
func (r *run) follow(ctx, readCtx context.Context) bool {
	r.runCtx, r.abort = context.WithCancel(ctx)
	defer r.abort()
	msgs := make(chan inbound, 1)
	go r.readAfterRun(readCtx, msgs)
	for {
		select {
		case <-r.ticket.Changed():
			if r.update(ctx, r.ticket.Take()) {
				return false
			}
		case m := <-msgs:
			err := m.err
			if err == nil {
				err = r.input(m.data)
			}
			if err != nil {
				r.clientFault(ctx, err)
				return false
			}
		case out := <-r.done:
			r.complete(ctx, out)
			return true
		}
	}
}

// update acts on the dispatcher's news. It reports whether the task is
// over: it could not start, or the scheduler ended it.
func (r *run) update(ctx context.Context, u Update) (ended bool) {
	if u.Estimate != nil && r.exec == nil {
		r.tellEstimate(ctx, *u.Estimate)
	}
	if u.Start != nil {
		if err := r.start(ctx, *u.Start); err != nil {
			r.srv.metrics.endedUnrun()
			r.send(ctx, "complete", completeBody{Error: err.Error()})
			return true
		}
	}
	if u.Shorten != 0 && r.exec != nil {
		r.exec.Shorten(u.Shorten)
	}
	if u.End != "" {
		r.stop()
		if r.exec == nil {
			r.srv.metrics.denied(denialReasonOfText(u.End))
			r.send(ctx, "denied", deniedBody{Error: u.End})
		} else {
			r.srv.metrics.endedUnrun()
			r.send(ctx, "complete", completeBody{Error: u.End})
		}
		return true
	}
	return false
}

func (r *run) tellEstimate(ctx context.Context, e Estimate) {
	body := queueBody{Position: &e.Position}
	if e.Known {
		body.Estimate = millis(e.Wait)
		r.told = &told{at: time.Now(), wait: e.Wait}
	}
	r.send(ctx, "queue", body)
}

func (r *run) start(ctx context.Context, st Start) error {
	r.send(ctx, "queue", queueBody{Passed: true})
	if !r.task.Interactive {
		r.srv.metrics.waited(time.Since(r.queuedAt))
	}
	if r.told != nil {
		r.srv.metrics.estimateError(time.Since(r.told.at) - r.told.wait)
	}
	if st.Backend == nil {
		return fmt.Errorf(backendFaultPrefix+"%s is gone", st.BackendID)
	}
	task := r.task
	if !task.Interactive { // an interactive task keeps the client's timeout (0: the backend's maximum)
		task.Timeout = st.Timeout
	}
	r.relay = newRelay(ctx, r.out, r.srv.cacheable(task))
	exec, err := st.Backend.Start(r.runCtx, task, r.relay)
	if errors.Is(err, backend.ErrGone) {
		return backend.ErrGone // the client is told the protocol's text, nothing more
	}
	if err != nil {
		return fmt.Errorf(backendFaultPrefix+"%s could not start the task: %w", st.BackendID, err)
	}
	r.exec = exec
	for _, data := range r.early {
		if err := exec.Input(data); err != nil {
			r.srv.cfg.Logger.Debug("asy: input refused", "client", r.client, "err", err)
		}
	}
	r.early = nil
	r.done = make(chan sandbox.Outcome, 1)
	go func() { r.done <- exec.Wait() }()
	return nil
}

// stop aborts the run, if any, and waits until nothing of it is left.
func (r *run) stop() {
	r.abort()
	if r.exec != nil {
		<-r.done
	}
}

// input feeds an interactive run (input sent before it started is kept
// for its start); for any other task it is a protocol error.
func (r *run) input(data []byte) error {
	if !r.task.Interactive {
		return &wire.Error{Text: "\"input\" is only for a running interactive task"}
	}
	if r.exec == nil {
		n := len(data)
		for _, d := range r.early {
			n += len(d)
		}
		if int64(n) > r.srv.cfg.MaxInput {
			return &wire.Error{Text: fmt.Sprintf("input too large: at most %d bytes before the task starts", r.srv.cfg.MaxInput)}
		}
		r.early = append(r.early, data)
		return nil
	}
	if err := r.exec.Input(data); err != nil {
		r.srv.cfg.Logger.Debug("asy: input refused", "client", r.client, "err", err)
	}
	return nil
}

// clientFault ends the task because of the client: gone (nothing to tell)
// or a protocol error (denied while queued, complete while running).
func (r *run) clientFault(ctx context.Context, err error) {
	r.stop()
	if !wire.IsProtocol(err) {
		return
	}
	if r.exec == nil {
		r.send(ctx, "denied", deniedBody{Error: err.Error()})
	} else {
		r.send(ctx, "complete", completeBody{Error: err.Error()})
	}
}

func (r *run) complete(ctx context.Context, out sandbox.Outcome) {
	if !out.Success && ctx.Err() != nil { // aborted by a shutdown
		out.Error = ErrStopped.Error()
	}
	r.srv.metrics.compiled(out)
	r.send(ctx, "complete", completeBody{Success: out.Success, Error: out.Error, Time: millis(out.Time)})
	if out.Success {
		r.srv.store(ctx, r.task, r.relay, out.Time)
	}
}
