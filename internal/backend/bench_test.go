package backend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/usherhq/usher/internal/asybench"
	"github.com/usherhq/usher/internal/sandbox"
)

// benchFigure is a typical small figure: a path, a dot and a TeX label.
const benchFigure = asybench.Figure

// BenchmarkBackendVsAsy runs the same figure and format through the
// backend (a real loopback WebSocket, newTestRunner's runner) and through
// bare asy, interleaved and alternating which goes first, and reports the
// medians and the backend's overhead over bare asy. Goal: the
// overhead at the median is at most 5 ms or 5 %, whichever is larger.
//
//	go test -run '^$' -bench BackendVsAsy -benchtime 20x ./internal/backend/
func BenchmarkBackendVsAsy(b *testing.B) {
	for _, format := range []string{"svg", "pdf", "png"} {
		b.Run(format, func(b *testing.B) {
			tb := newTestBackend(b)
			var viaBackend, bare []time.Duration
			for i := 0; b.Loop(); i++ {
				first, second := func() { viaBackend = append(viaBackend, tb.timeBackend(b, format)) },
					func() { bare = append(bare, timeBareAsy(b, format)) }
				if i%2 == 1 {
					first, second = second, first
				}
				first()
				second()
			}
			reportOverhead(b, viaBackend, bare)
		})
	}
}

// timeBackend times one task from dialing to the complete message.
func (tb *testBackend) timeBackend(b *testing.B, format string) time.Duration {
	start := time.Now()
	c := tb.dial(b)
	c.add("fig.asy", true, benchFigure)
	c.send(VerbOptions, map[string]any{"format": format})
	c.send(VerbRun, nil)
	msgs := c.until(func(m message) bool { return m.verb == VerbComplete })
	took := time.Since(start)
	if done := last(b, msgs); !done.Success || countVerb(msgs, VerbResult) != 1 {
		b.Fatalf("backend: %+v after %v", done, msgs)
	}
	_ = c.ws.Close(websocket.StatusNormalClosure, "")
	tb.rec.ended(b, 10*time.Second)
	return took
}

// timeBareAsy times bare asy on benchFigure.
func timeBareAsy(b *testing.B, format string) time.Duration {
	d, err := asybench.Bare(benchFigure, format)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func reportOverhead(b *testing.B, viaBackend, bare []time.Duration) {
	mb, ma := asybench.Median(viaBackend), asybench.Median(bare)
	over := mb - ma
	pct := 100 * float64(over) / float64(ma)
	allowed := max(5*time.Millisecond, ma/20)
	b.ReportMetric(asybench.MS(mb), "backend-ms")
	b.ReportMetric(asybench.MS(ma), "asy-ms")
	b.ReportMetric(asybench.MS(over), "overhead-ms")
	b.ReportMetric(pct, "overhead-%")
	paired := asybench.Paired(viaBackend, bare)
	b.ReportMetric(asybench.MS(asybench.Median(paired)), "paired-overhead-ms")
	verdict := "met"
	if over > allowed {
		verdict = "NOT met"
	}
	b.Logf("n=%d backend p10/p50/p90 %s, asy %s; overhead %.1f ms (%.1f %%), allowed %.1f ms: goal %s; median of paired differences %.1f ms",
		len(bare), asybench.Spread(viaBackend), asybench.Spread(bare), asybench.MS(over), pct, asybench.MS(allowed), verdict, asybench.MS(asybench.Median(paired)))
}

// instantStarter is a FAKE runner for BenchmarkProtocol only: no asy, no
// files; each task sends one output and one image at once and succeeds. It
// isolates what the protocol layer itself costs per task.
type instantStarter struct{ image []byte }

type instantRun struct{}

func (s instantStarter) Start(_ context.Context, t sandbox.Task, sink sandbox.Sink) (Execution, error) {
	if err := sink.Output(sandbox.Stdout, []byte("ok\n")); err != nil {
		return nil, err
	}
	if err := sink.Result(t.Format, s.image); err != nil {
		return nil, err
	}
	return instantRun{}, nil
}

func (instantRun) Shorten(time.Duration) {}
func (instantRun) Input([]byte) error    { return nil }
func (instantRun) Wait() sandbox.Outcome { return sandbox.Outcome{Success: true} }

// BenchmarkProtocol is one whole task over a real loopback WebSocket (dial,
// add a 1 KiB file, options, run, output, a 16 KiB result, complete,
// close) with a runner that takes no time: the protocol layer's own cost.
//
//	go test -run '^$' -bench Protocol -benchmem ./internal/backend/
func BenchmarkProtocol(b *testing.B) {
	rec := &recorder{Starter: instantStarter{image: make([]byte, 16<<10)}, tasks: make(chan sandbox.Task, 1), waited: make(chan sandbox.Outcome, 1)}
	tb := newTestBackendWith(b, rec)
	src := strings.Repeat("// padding\n", 1<<10/11)
	for b.Loop() {
		c := tb.dial(b)
		c.add("fig.asy", true, src)
		c.send(VerbOptions, map[string]any{"format": "png"})
		c.send(VerbRun, nil)
		msgs, status := c.transcript()
		if done := last(b, msgs); !done.Success || status != websocket.StatusNormalClosure {
			b.Fatalf("%v closed with %v", msgs, status)
		}
		<-rec.tasks
		<-rec.waited
	}
}
