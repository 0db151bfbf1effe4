package asyqueue

import (
	"context"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
)

// Starter starts a task on a backend: the in-process sandbox runner or a
// remote `usher backend` reached over the backend protocol.
type Starter interface {
	Start(ctx context.Context, t sandbox.Task, sink sandbox.Sink) (Execution, error)
}

// Execution is a started task. Cancelling the context given to Start aborts
// it; Wait returns once nothing of it is left on the backend.
type Execution interface {
	Shorten(timeout time.Duration)
	Input(data []byte) error
	Wait() sandbox.Outcome
}
