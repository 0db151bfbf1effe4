package sandbox

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

// spin writes a line (so a test knows asy is running) and loops forever.
const spin = `write("started"); while(true) {}` + "\n"

func TestFormats(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	for _, format := range []string{FormatSVG, FormatPDF, FormatPNG} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			task := mainTask(figure)
			task.Format = format
			o, s := runTask(t, r, task)
			wantOutcome(t, o, true, "", s)
			if s.ImageCount() != 1 || s.Formats()[0] != format || !HasMagic(format, s.Image(0)) {
				t.Fatalf("want one %s image, got %d (formats %v)", format, s.ImageCount(), s.Formats())
			}
			if o.Time <= 0 {
				t.Errorf("outcome time %v", o.Time)
			}
		})
	}
}

func TestDefaultFormatIsSVG(t *testing.T) {
	t.Parallel()
	o, s := runTask(t, newRunner(t, Limits{}), mainTask(figure))
	wantOutcome(t, o, true, "", s)
	if s.Formats()[0] != FormatSVG || !HasMagic(FormatSVG, s.Image(0)) {
		t.Fatalf("format %v", s.Formats())
	}
}

// A TeX label needs latex in the sandbox; dvisvgm turns its glyphs into
// <path> definitions used by <use>, which a figure without text lacks.
func TestLaTeXLabel(t *testing.T) {
	t.Parallel()
	o, s := runTask(t, newRunner(t, Limits{}), mainTask(`label("$x^2$");`))
	wantOutcome(t, o, true, "", s)
	if svg := string(s.Image(0)); !strings.Contains(svg, "<use") {
		t.Fatalf("no glyphs in the svg:\n%s", svg)
	}
}

func TestSyntaxError(t *testing.T) {
	t.Parallel()
	o, s := runTask(t, newRunner(t, Limits{}), mainTask("int x = ;\n"))
	wantOutcome(t, o, false, "Execution failed with code 1", s)
	if out := s.Text(Stdout); !strings.Contains(out, "main.asy: 1.9: syntax error") {
		t.Fatalf("stderr (merged into stdout) lacks the message: %q", out)
	}
	if s.ImageCount() != 0 {
		t.Fatal("an image for a syntax error")
	}
}

// A TeX error in a label reaches the user as TeX reported it.
func TestLaTeXErrorIsReported(t *testing.T) {
	t.Parallel()
	o, s := runTask(t, newRunner(t, Limits{}), mainTask(`label("$\undefinedmacro$");`))
	wantOutcome(t, o, false, "Execution failed with code 1", s)
	if out := s.Text(""); !strings.Contains(out, "! Undefined control sequence.") {
		t.Fatalf("the TeX error is missing: %q", tail(out, 2000))
	}
}

func TestNoImage(t *testing.T) {
	t.Parallel()
	o, s := runTask(t, newRunner(t, Limits{}), mainTask("int x = 1;\n"))
	wantOutcome(t, o, false, "No image output", s)
}

// An image written before asy fails is still sent, before the outcome.
func TestFailedRunStillSendsImage(t *testing.T) {
	t.Parallel()
	o, s := runTask(t, newRunner(t, Limits{}), mainTask(figure+"shipout(outprefix());\nreal y = 1/0;\n"))
	wantOutcome(t, o, false, "Execution failed with code 1", s)
	if s.ImageCount() != 1 || !HasMagic(FormatSVG, s.Image(0)) {
		t.Fatalf("%d images", s.ImageCount())
	}
}

func TestTimeLimit(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{MaxTimeout: 1500 * time.Millisecond})
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    string
	}{
		{"task's own", time.Second, "Execution aborted due to the time limit (1000ms)"},
		{"none: the maximum", 0, "Execution aborted due to the time limit (1500ms)"},
		{"capped to the maximum", time.Hour, "Execution aborted due to the time limit (1500ms)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := mainTask(spin)
			task.Timeout = tc.timeout
			began := time.Now()
			o, s := runTask(t, r, task)
			wantOutcome(t, o, false, tc.want, s)
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

func TestShorten(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	for _, tc := range []struct {
		name    string
		timeout time.Duration // the task's
		shorten time.Duration // once "started" is out
		want    string
		within  time.Duration // Wait returns within this after Shorten
	}{
		{"lowers the limit", 30 * time.Second, 1500 * time.Millisecond, "Execution aborted due to the time limit (1500ms)", 4 * time.Second},
		{"a passed limit stops at once", 30 * time.Second, time.Millisecond, "Execution aborted due to the time limit (1ms)", time.Second},
		{"zero stops at once", 30 * time.Second, 0, "Execution aborted due to the time limit (0ms)", time.Second},
		{"a later limit is ignored", 1500 * time.Millisecond, 30 * time.Second, "Execution aborted due to the time limit (1500ms)", 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := mainTask(spin)
			task.Timeout = tc.timeout
			run, s := start(t, context.Background(), r, task)
			s.WaitOutput(t, outputWait, "started")
			shortened := time.Now()
			run.Shorten(tc.shorten)
			o := run.Wait()
			took := time.Since(shortened)
			assertGone(t, run)
			wantOutcome(t, o, false, tc.want, s)
			if took > tc.within {
				t.Errorf("Wait returned %v after Shorten, want within %v", took, tc.within)
			}
		})
	}
}

func TestOutputLimit(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{Output: 1000})
	o, s := runTask(t, r, mainTask(`while(true) write("0123456789");`))
	wantOutcome(t, o, false, "Execution aborted due to the output limit (1000B)", s)
	out := s.Text("")
	if len(out) != 1000 || out != strings.Repeat("0123456789\n", 91)[:1000] {
		t.Fatalf("forwarded %d bytes, want the first 1000 exactly: %q", len(out), tail(out, 50))
	}
}

// Output arrives in batches as it comes, not all at the end.
func TestOutputStreamsWhileRunning(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	task := mainTask(`write("first"); while(true) {}`)
	task.Timeout = 20 * time.Second
	run, s := start(t, context.Background(), r, task)
	s.WaitFor(t, outputWait, func() bool { return s.Text(Stdout) == "first\n" }, "stdout %q", "first\n")
	run.Shorten(0)
	o := run.Wait()
	assertGone(t, run)
	wantOutcome(t, o, false, "Execution aborted due to the time limit (0ms)", s)
}

func TestStderr(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	const src = "write(\"to-stdout\");\nreal y = 1/0;\n"
	const errText = "main.asy: 2.1: Divide by zero"
	for _, tc := range []struct {
		name               string
		separate           bool
		wantStdout, notOut []string
		wantStderr         []string
	}{
		{"merged", false, []string{"to-stdout", errText}, nil, nil},
		{"separate", true, []string{"to-stdout"}, []string{errText}, []string{errText}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := mainTask(src)
			task.SeparateStderr = tc.separate
			o, s := runTask(t, r, task)
			wantOutcome(t, o, false, "Execution failed with code 1", s)
			out, errOut := s.Text(Stdout), s.Text(Stderr)
			for _, w := range tc.wantStdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout %q lacks %q", out, w)
				}
			}
			for _, w := range tc.notOut {
				if strings.Contains(out, w) {
					t.Errorf("stdout %q has %q", out, w)
				}
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
			if !tc.separate && errOut != "" {
				t.Errorf("merged run sent stderr %q", errOut)
			}
		})
	}
}

// Each level adds output; -vvv adds latex's transcript, so the figure has
// a label.
func TestVerbosity(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	sizes := make([]int, 4)
	for v := range 4 {
		task := mainTask(figure + `label("$x$");`)
		task.Verbosity = v
		o, s := runTask(t, r, task)
		wantOutcome(t, o, true, "", s)
		sizes[v] = len(s.Text(""))
	}
	for v := 1; v < 4; v++ {
		if sizes[v] <= sizes[v-1] {
			t.Fatalf("output sizes by verbosity %v: each level should add output", sizes)
		}
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	task := mainTask(spin)
	task.Timeout = 30 * time.Second
	run, s := start(t, ctx, r, task)
	s.WaitOutput(t, outputWait, "started")
	cancel()
	cancelled := time.Now()
	o := run.Wait()
	if took := time.Since(cancelled); took > 2*time.Second {
		t.Errorf("Wait returned %v after cancel", took)
	}
	assertGone(t, run)
	wantOutcome(t, o, false, "Execution aborted: context canceled", s)
	checkNextTask(t, r)
}

// A Sink error (the client went away) aborts the run; the Sink is not
// called again.
func TestSinkErrorAborts(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	s := sandboxtest.NewSink()
	s.FailOn(1)
	task := mainTask(`while(true) write("flood");`)
	task.Timeout = 30 * time.Second
	run, err := r.Start(context.Background(), task, s)
	if err != nil {
		t.Fatal(err)
	}
	o := run.Wait()
	assertGone(t, run)
	wantOutcome(t, o, false, "Execution aborted: client went away (call 1)", s)
	if s.Calls() != 1 {
		t.Fatalf("%d Sink calls, want 1", s.Calls())
	}
}

func TestConcurrentTasks(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	const n = 20
	var wg sync.WaitGroup
	outcomes := make([]Outcome, n)
	sinks := make([]*sandboxtest.Sink, n)
	runs := make([]*Run, n)
	for i := range n {
		wg.Go(func() {
			s := sandboxtest.NewSink()
			run, err := r.Start(context.Background(), mainTask(figure), s)
			if err != nil {
				t.Error(err)
				return
			}
			runs[i], sinks[i], outcomes[i] = run, s, run.Wait()
		})
	}
	wg.Wait()
	for i := range n {
		if runs[i] == nil {
			continue
		}
		assertGone(t, runs[i])
		if !outcomes[i].Success || sinks[i].ImageCount() != 1 || !HasMagic(FormatSVG, sinks[i].Image(0)) {
			t.Errorf("task %d: %+v, %d images; output %q", i, outcomes[i], sinks[i].ImageCount(), sinks[i].Text(""))
		}
	}
}
