package backend

import (
	"context"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
)

// Starter starts one task; the backend needs nothing else of the runner.
// Sandbox adapts a *sandbox.Runner.
type Starter interface {
	// Start validates t, writes its files and starts it; cancelling ctx
	// aborts it. sink receives output and images until Wait returns.
	Start(ctx context.Context, t sandbox.Task, sink sandbox.Sink) (Execution, error)
}

// Execution is one started task, as *sandbox.Run is.
type Execution interface {
	// Shorten lowers the wall-clock limit, counted from the start.
	Shorten(timeout time.Duration)
	// Input feeds an interactive task's stdin.
	Input(data []byte) error
	// Wait returns the outcome once nothing of the task is left.
	Wait() sandbox.Outcome
}

// Sandbox returns r as a Starter. It is also an io.Closer that closes r
// (its spare displays, its shader cache template): call Close once no task
// runs.
func Sandbox(r *sandbox.Runner) Starter { return runnerStarter{r} }

type runnerStarter struct{ r *sandbox.Runner }

func (s runnerStarter) Start(ctx context.Context, t sandbox.Task, sink sandbox.Sink) (Execution, error) {
	run, err := s.r.Start(ctx, t, sink)
	if err != nil {
		return nil, err // not a nil *Run inside a non-nil interface
	}
	return run, nil
}

// Close closes the runner: its spare displays are killed and its shader
// cache template removed.
func (s runnerStarter) Close() error { return s.r.Close() }
