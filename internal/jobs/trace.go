package jobs

import (
	"github.com/usherhq/usher/internal/telemetry"
	"github.com/usherhq/usher/jobtype"
)

// checkTraceparent drops a job's trace context that does not parse: it
// is the caller's to give, never trusted, so a bad one is a warning and
// not an error (docs/operations.md, "Tracing").
func (e *Engine) checkTraceparent(sp *jobtype.JobSpec) {
	if sp.Traceparent == "" {
		return
	}
	if _, ok := telemetry.Parse(sp.Traceparent); !ok || len(sp.Traceparent) > 256 {
		e.cfg.Logger.Warn("jobs: ignoring a job's traceparent that does not parse", "queue", sp.Queue,
			"traceparent", truncate(sp.Traceparent, 64))
		sp.Traceparent = ""
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// keepTrace remembers an unfinished job's trace context, for its lease
// and its completion; most jobs have none, and cost nothing here.
func (e *Engine) keepTrace(id, traceparent string) {
	if traceparent == "" {
		return
	}
	if e.traces == nil {
		e.traces = map[string]string{}
	}
	e.traces[id] = traceparent
}

// Traceparents returns the trace contexts of the unfinished jobs among
// ids that have one.
func (e *Engine) Traceparents(ids []string) map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.traces) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, id := range ids {
		if tp, ok := e.traces[id]; ok {
			out[id] = tp
		}
	}
	return out
}
