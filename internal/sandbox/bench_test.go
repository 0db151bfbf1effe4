package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

// BenchmarkOverhead renders the same figure (with a LaTeX label, to svg)
// through the Runner and through bare asy, interleaved, and reports the
// median wall time of each and the median of the paired differences (each
// Runner run minus the bare run right after it, which cancels most of the
// noise of a shared machine), also as a percentage of bare asy's median.
// The Runner's time is Start to Wait: work directory, sandbox, rlimits,
// forwarding, the image read back, teardown and cleanup. Bare asy runs as a user
// would run it by hand: same flags, its own directory and HOME kept
// between runs. Run it with
//
//	go test -run '^$' -bench Overhead -benchtime 40x ./internal/sandbox/
func BenchmarkOverhead(b *testing.B) {
	r := newRunner(b, Limits{})
	bareDir := b.TempDir()
	src := []byte(testFigure)
	if err := os.WriteFile(filepath.Join(bareDir, "main.asy"), src, 0o644); err != nil {
		b.Fatal(err)
	}
	task := Task{Files: []File{{Name: "main.asy", Data: src, Main: true}}}
	var sandboxed, bare, diffs []time.Duration
	for b.Loop() {
		began := time.Now()
		s := sandboxtest.NewSink()
		run, err := r.Start(context.Background(), task, s)
		if err != nil {
			b.Fatal(err)
		}
		o := run.Wait()
		sandboxed = append(sandboxed, time.Since(began))
		if !o.Success || s.ImageCount() != 1 {
			b.Fatalf("runner: %+v", o)
		}
		began = time.Now()
		cmd := exec.Command(r.tools.asy, "-noV", "-safe", "-noglobalread", "-o", "out", "-f", "svg", "--", "main.asy")
		cmd.Dir = bareDir
		cmd.Env = sandboxEnv(filepath.Join(bareDir, homeName))
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("bare asy: %v: %s", err, out)
		}
		bare = append(bare, time.Since(began))
		diffs = append(diffs, sandboxed[len(sandboxed)-1]-bare[len(bare)-1])
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	mb, md := median(bare), median(diffs)
	b.ReportMetric(ms(median(sandboxed)), "runner-ms")
	b.ReportMetric(ms(mb), "bare-ms")
	b.ReportMetric(ms(md), "overhead-ms")
	b.ReportMetric(100*float64(md)/float64(mb), "overhead-%")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
