// Package asybench holds what the benchmarks that compare usher with bare
// asy share: the bare run itself and the statistics of timings. Only
// benchmarks and bench programs import it.
package asybench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Figure is a typical small figure: a path, a dot and a TeX label.
const Figure = `size(4cm);
draw(unitcircle);
dot((0,0));
label("$x^2+y^2=1$", (1,0), E);
`

// Bare times what any backend does at the least: write the file into a
// fresh directory, run asy as the runner invokes it (no sandbox), read the
// image.
func Bare(source, format string) (time.Duration, error) {
	start := time.Now()
	dir, err := os.MkdirTemp("", "bench-asy-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "fig.asy"), []byte(source), 0o600); err != nil {
		return 0, err
	}
	cmd := exec.Command("/usr/bin/asy", "-noV", "-safe", "-noglobalread", "-f", format, "-o", filepath.Join(dir, "out"), "fig.asy")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "ASYMPTOTE_HOME=" + filepath.Join(dir, ".asy")}
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("asy: %w: %s", err, out)
	}
	if _, err := os.ReadFile(filepath.Join(dir, "out."+format)); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Median returns the median of d.
func Median(d []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(d))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Spread formats the 10th, 50th and 90th percentiles in milliseconds.
func Spread(d []time.Duration) string {
	s := slices.Sorted(slices.Values(d))
	if len(s) == 0 {
		return "-"
	}
	at := func(q float64) float64 { return MS(s[int(q*float64(len(s)-1))]) }
	return fmt.Sprintf("%.0f/%.0f/%.0f ms", at(0.1), MS(Median(d)), at(0.9))
}

// MS is d in milliseconds.
func MS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Paired returns a[i] - b[i] for each i.
func Paired(a, b []time.Duration) []time.Duration {
	out := make([]time.Duration, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] - b[i]
	}
	return out
}

// Alternate runs first and second once per benchmark iteration, taking
// turns at going first, so that neither always runs on a machine the
// other has just warmed (or loaded).
func Alternate(b *testing.B, first, second func()) {
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			first()
			second()
		} else {
			second()
			first()
		}
	}
}
