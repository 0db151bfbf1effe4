package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

// sphere3D is the small 3D figure of the benchmarks.
const sphere3D = "import three; size(4cm); currentprojection=orthographic(4,2,3); draw(unitsphere, red);\n"

// cost is what one run took: wall clock and CPU (user+system of the whole
// tree that was waited for: bwrap, sh, Xvfb, asy, latex, gs).
type cost struct{ wall, cpu time.Duration }

// variant is one way of rendering, run once per benchmark iteration.
type variant struct {
	name string
	run  func(b *testing.B) cost
}

// BenchmarkRender3D renders sphere3D in each format nine ways,
// interleaved (the order rotates every iteration) so that the load of a
// shared machine hits all alike:
//
//	opengl        the Runner as shipped: sandbox, OpenGL (llvmpipe) on a
//	              spare display (spare.go) started after the previous
//	              task and ready before this one, Mesa's shader cache
//	              New's template bound read-only, with a copy of its index
//	opengl-copy   the same with the shader cache as before the read-only
//	              template: a private copy of the template's entries
//	              written into the task's HOME, without the index
//	opengl-fresh  opengl without spare displays: the task starts its
//	              own Xvfb (display.go), asy as soon as Xvfb's socket exists
//	opengl-cold   opengl-fresh with an empty shader cache
//	opengl-ready  opengl-fresh, asy started only once Xvfb is ready
//	vector        the Runner with asy -render=0: sandbox, no display, vector 3D
//	bare-opengl   asy by hand outside the sandbox, on an Xvfb started once
//	              (shader cache warm in the user's HOME)
//	xvfb-run      asy by hand on a headless machine: xvfb-run -a asy …
//	bare-vector   asy -render=0 by hand outside the sandbox
//
// opengl and opengl-copy wait, untimed, for their next spare to be ready
// after each run (the spare starts between tasks); their CPU is the
// task's, and "<variant>-spare" is the CPU of the spare each used (Xvfb's
// start and what it did for the task), which the other Runner variants'
// CPU misses: their Xvfb is killed with the sandbox's PID 1 and its
// rusage reaches no one.
//
// It reports each one's median wall and CPU time and the medians of the
// per-iteration ratios opengl/xvfb-run and opengl/bare-opengl (the 3D
// goal), opengl/opengl-copy (the read-only template's gain),
// opengl/opengl-fresh (the spare's gain), opengl-fresh/xvfb-run,
// opengl-fresh/bare-opengl, opengl-ready/bare-opengl and
// opengl-fresh/opengl-ready (the overlap's gain), opengl-cold/opengl-fresh
// (the shader cache template's gain) and vector/opengl. Run it with
//
//	go test -run '^$' -bench Render3D -benchtime 20x ./internal/sandbox/
func BenchmarkRender3D(b *testing.B) {
	gl := newRunner(b, Limits{})
	copied := newRunner(b, Limits{})
	copied.copyShaderCache = true
	fresh := newRunner(b, Limits{})
	fresh.spares = nil
	cold := newRunner(b, Limits{})
	cold.shaderCache, cold.spares = nil, nil
	ready := newRunner(b, Limits{})
	ready.displayReady, ready.spares = true, nil
	vec := newRunner(b, Limits{})
	vec.render3D = render3DVector
	display := hostDisplay(b)
	for _, format := range []string{FormatSVG, FormatPDF, FormatPNG} {
		b.Run(format, func(b *testing.B) {
			bare := bareAsy(b, sphere3D, format)
			costs := map[string][]cost{}
			costs = interleave(b, costs, []variant{
				spareVariant("opengl", gl, sphere3D, format, costs),
				spareVariant("opengl-copy", copied, sphere3D, format, costs),
				{"opengl-fresh", runnerVariant(fresh, sphere3D, format)},
				{"opengl-cold", runnerVariant(cold, sphere3D, format)},
				{"opengl-ready", runnerVariant(ready, sphere3D, format)},
				{"vector", runnerVariant(vec, sphere3D, format)},
				{"bare-opengl", bare(nil, "DISPLAY="+display)},
				{"xvfb-run", bare([]string{"/usr/bin/xvfb-run", "-a", "-s", "-nolisten tcp -screen 0 " + displayScreen}, "")},
				{"bare-vector", bare(nil, "", "-render=0")},
			})
			report(b, costs)
			reportRatio(b, costs, "opengl", "xvfb-run")
			reportRatio(b, costs, "opengl", "bare-opengl")
			reportRatio(b, costs, "opengl", "opengl-copy")
			reportRatio(b, costs, "opengl-copy", "xvfb-run")
			reportRatio(b, costs, "opengl", "opengl-fresh")
			reportRatio(b, costs, "opengl-fresh", "xvfb-run")
			reportRatio(b, costs, "opengl-fresh", "bare-opengl")
			reportRatio(b, costs, "opengl-ready", "bare-opengl")
			reportRatio(b, costs, "opengl-fresh", "opengl-ready")
			reportRatio(b, costs, "opengl-cold", "opengl-fresh")
			reportRatio(b, costs, "vector", "opengl")
		})
	}
}

// spareVariant is the variant name, runnerVariant on a Runner with spare
// displays: it fails unless every run but the first had one, records as
// name+"-spare" in costs the CPU of the spare each run used, and waits,
// untimed, for the next spare to be ready.
func spareVariant(name string, r *Runner, src, format string, costs map[string][]cost) variant {
	first := true
	return variant{name, func(b *testing.B) cost {
		c, run := runOnce(b, r, src, format)
		switch {
		case run.spare != nil:
			costs[name+"-spare"] = append(costs[name+"-spare"], cost{cpu: cpuOf(run.spare.proc.cmd.ProcessState)})
		case !first:
			b.Fatal("the task had no spare display")
		}
		first = false
		if !r.spares.waitIdle() {
			b.Fatal("no spare display became ready")
		}
		return c
	}}
}

// BenchmarkDisplayCost2D is what a private display would cost a 2D task
// and what detect3d.go saves: the self-test figure (a circle and a LaTeX
// label) to svg through a Runner that gives every task a display and
// through the Runner as shipped, which gives this task none. Run it with
//
//	go test -run '^$' -bench DisplayCost2D -benchtime 20x ./internal/sandbox/
func BenchmarkDisplayCost2D(b *testing.B) {
	shipped := newRunner(b, Limits{})
	always := newRunner(b, Limits{})
	always.rule3D, always.spares = rule3D{always: true}, nil
	costs := interleave(b, map[string][]cost{}, []variant{
		{"display", runnerVariant(always, testFigure, FormatSVG)},
		{"shipped", runnerVariant(shipped, testFigure, FormatSVG)},
	})
	report(b, costs)
	reportRatio(b, costs, "display", "shipped")
}

// interleave runs every variant once per iteration, rotating the order,
// and adds their costs to costs.
func interleave(b *testing.B, costs map[string][]cost, vs []variant) map[string][]cost {
	for i := 0; b.Loop(); i++ {
		for j := range vs {
			v := vs[(i+j)%len(vs)]
			costs[v.name] = append(costs[v.name], v.run(b))
		}
	}
	return costs
}

// runnerVariant renders src through r and fails on anything but success.
func runnerVariant(r *Runner, src, format string) func(b *testing.B) cost {
	return func(b *testing.B) cost {
		c, _ := runOnce(b, r, src, format)
		return c
	}
}

// runOnce renders src through r, fails on anything but success and
// returns the cost and the run.
func runOnce(b *testing.B, r *Runner, src, format string) (cost, *Run) {
	task := mainTask(src)
	task.Format = format
	began := time.Now()
	s := sandboxtest.NewSink()
	run, err := r.Start(context.Background(), task, s)
	if err != nil {
		b.Fatal(err)
	}
	o := run.Wait()
	wall := time.Since(began)
	if !o.Success || s.ImageCount() != 1 {
		b.Fatalf("runner: %+v: %s", o, tail(s.Text(""), 2000))
	}
	return cost{wall: wall, cpu: cpuOf(run.proc.cmd.ProcessState)}, run
}

// bareAsy runs asy by hand in a directory of its own, with the host's
// passwd HOME for Mesa's shader cache (warm after the first run, as for a
// user at a desktop); a wrapper command (xvfb-run), env and flags are
// added per variant.
func bareAsy(b *testing.B, src, format string) func(wrap []string, env string, flags ...string) func(b *testing.B) cost {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.asy"), []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	return func(wrap []string, env string, flags ...string) func(b *testing.B) cost {
		return func(b *testing.B) cost {
			argv := append(slices.Clone(wrap), "/usr/bin/asy", "-noV", "-safe", "-noglobalread", "-o", "out", "-f", format)
			argv = append(append(argv, flags...), "--", "main.asy")
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = dir
			cmd.Env = sandboxEnv(filepath.Join(dir, homeName))
			if env != "" {
				cmd.Env = append(cmd.Env, env)
			}
			os.Remove(filepath.Join(dir, "out."+format))
			began := time.Now()
			out, err := cmd.CombinedOutput()
			wall := time.Since(began)
			if _, statErr := os.Stat(filepath.Join(dir, "out."+format)); err != nil || statErr != nil {
				b.Fatalf("bare asy: %v %v: %s", err, statErr, out)
			}
			return cost{wall: wall, cpu: cpuOf(cmd.ProcessState)}
		}
	}
}

// hostDisplay starts one Xvfb on the host for the bare runs and returns
// its display (":<n>"); it is stopped when the benchmark ends.
func hostDisplay(b *testing.B) string {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("/usr/bin/Xvfb", "-displayfd", "3", "-nolisten", "tcp", "-noreset", "-screen", "0", displayScreen)
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start Xvfb: %v", err)
	}
	w.Close()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		b.Fatalf("Xvfb did not report its display: %v", err)
	}
	return ":" + strings.TrimSpace(line)
}

func cpuOf(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// report gives each variant's median wall and CPU time in milliseconds.
func report(b *testing.B, costs map[string][]cost) {
	for name, cs := range costs {
		walls, cpus := split(cs)
		b.ReportMetric(msOf(median(walls)), name+"-ms")
		b.ReportMetric(msOf(median(cpus)), name+"-cpu-ms")
	}
}

// reportRatio gives the median of the per-iteration ratios a/b, of wall
// and of CPU time.
func reportRatio(b *testing.B, costs map[string][]cost, a, over string) {
	var walls, cpus []time.Duration
	for i := range min(len(costs[a]), len(costs[over])) {
		x, y := costs[a][i], costs[over][i]
		walls = append(walls, ratio(x.wall, y.wall))
		cpus = append(cpus, ratio(x.cpu, y.cpu))
	}
	name := fmt.Sprintf("%s/%s", a, over)
	b.ReportMetric(float64(median(walls))/1000, name)
	b.ReportMetric(float64(median(cpus))/1000, name+"-cpu")
}

// ratio is x/y in thousandths, as a Duration so that median applies.
func ratio(x, y time.Duration) time.Duration {
	if y == 0 {
		return 0
	}
	return time.Duration(1000 * float64(x) / float64(y))
}

func split(cs []cost) (walls, cpus []time.Duration) {
	for _, c := range cs {
		walls = append(walls, c.wall)
		cpus = append(cpus, c.cpu)
	}
	return walls, cpus
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
