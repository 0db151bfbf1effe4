package backend

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/usherhq/usher/internal/sandbox"
)

// benchFigure is a typical small figure: a path, a dot and a TeX label.
const benchFigure = `size(4cm);
draw(unitcircle);
dot((0,0));
label("$x^2+y^2=1$", (1,0), E);
`

// BenchmarkBackendVsAsy runs the same figure and format through the
// backend (a real loopback WebSocket, newTestRunner's runner) and through
// bare asy, interleaved and alternating which goes first, and reports the
// medians and the backend's overhead over bare asy. Goal (issue 3): the
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

// timeBareAsy times what a backend does at the least: write the file into
// a fresh directory, run asy as the runner invokes it, read the image.
func timeBareAsy(b *testing.B, format string) time.Duration {
	start := time.Now()
	dir, err := os.MkdirTemp("", "bench-asy-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "fig.asy"), []byte(benchFigure), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/asy", "-noV", "-safe", "-noglobalread", "-f", format, "-o", filepath.Join(dir, "out"), "fig.asy")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "ASYMPTOTE_HOME=" + filepath.Join(dir, ".asy")}
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("asy: %v: %s", err, out)
	}
	if _, err := os.ReadFile(filepath.Join(dir, "out."+format)); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func reportOverhead(b *testing.B, viaBackend, bare []time.Duration) {
	mb, ma := median(viaBackend), median(bare)
	over := mb - ma
	pct := 100 * float64(over) / float64(ma)
	allowed := max(5*time.Millisecond, ma/20)
	b.ReportMetric(ms(mb), "backend-ms")
	b.ReportMetric(ms(ma), "asy-ms")
	b.ReportMetric(ms(over), "overhead-ms")
	b.ReportMetric(pct, "overhead-%")
	paired := make([]time.Duration, len(bare))
	for i := range bare {
		paired[i] = viaBackend[i] - bare[i]
	}
	b.ReportMetric(ms(median(paired)), "paired-overhead-ms")
	verdict := "met"
	if over > allowed {
		verdict = "NOT met"
	}
	b.Logf("n=%d backend p10/p50/p90 %s, asy %s; overhead %.1f ms (%.1f %%), allowed %.1f ms: goal %s; median of paired differences %.1f ms",
		len(bare), spread(viaBackend), spread(bare), ms(over), pct, ms(allowed), verdict, ms(median(paired)))
}

func median(d []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(d))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(d []time.Duration) string {
	s := slices.Sorted(slices.Values(d))
	at := func(q float64) float64 { return ms(s[int(q*float64(len(s)-1))]) }
	return fmt.Sprintf("%.0f/%.0f/%.0f ms", at(0.1), ms(median(d)), at(0.9))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

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
