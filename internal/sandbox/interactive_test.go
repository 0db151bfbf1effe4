package sandbox

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func interactiveTask() Task {
	return Task{Interactive: true, Timeout: 30 * time.Second}
}

func input(t *testing.T, run *Run, s string) {
	t.Helper()
	if err := run.Input([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// write(1+2); answers 3, a drawing command sends a picture, and neither
// asy's welcome banner nor its prompts reach the client.
func TestInteractive(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	run, s := start(t, context.Background(), r, interactiveTask())
	input(t, run, "write(1+2);\n")
	s.WaitFor(t, outputWait, func() bool { return s.Text(Stdout) == "3\n" }, "stdout %q", "3\n")
	input(t, run, "draw((0,0)--(1,1));\n")
	s.WaitFor(t, outputWait, func() bool { return s.ImageCount() == 1 }, "an image")
	if !HasMagic(FormatSVG, s.Image(0)) {
		t.Fatalf("not an svg: %q", s.Image(0)[:min(40, len(s.Image(0)))])
	}
	if err := run.CloseInput(); err != nil {
		t.Fatal(err)
	}
	o := run.Wait()
	assertGone(t, run)
	wantOutcome(t, o, true, "", s)
	out := s.Text("")
	if strings.Contains(out, "Welcome") || strings.Contains(out, "\x1f") || strings.Contains(out, ">") {
		t.Fatalf("banner or prompt forwarded: %q", out)
	}
	if s.ImageCount() != 1 {
		t.Fatalf("%d images; the picture did not change after the draw", s.ImageCount())
	}
}

// Each rewrite of the picture is sent; commands that do not change it send
// nothing.
func TestInteractiveRewrites(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	task := interactiveTask()
	task.Format = FormatPNG
	run, s := start(t, context.Background(), r, task)
	input(t, run, "draw((0,0)--(1,1));\n")
	s.WaitFor(t, outputWait, func() bool { return s.ImageCount() == 1 }, "the first image")
	input(t, run, "write(\"no drawing\");\n")
	s.WaitOutput(t, outputWait, "no drawing")
	input(t, run, "draw((0,0)--(2,1), red);\n")
	s.WaitFor(t, outputWait, func() bool { return s.ImageCount() == 2 }, "the second image")
	if err := run.CloseInput(); err != nil {
		t.Fatal(err)
	}
	o := run.Wait()
	assertGone(t, run)
	wantOutcome(t, o, true, "", s)
	if n := s.ImageCount(); n != 2 {
		t.Fatalf("%d images, want 2", n)
	}
	if !HasMagic(FormatPNG, s.Image(1)) || bytes.Equal(s.Image(0), s.Image(1)) {
		t.Fatal("the second picture is not a new png")
	}
}

// Errors are reported and the session goes on; with stderr separate they
// come on stderr.
func TestInteractiveErrorsContinue(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	task := interactiveTask()
	task.SeparateStderr = true
	run, s := start(t, context.Background(), r, task)
	input(t, run, "int x = ;\n")
	s.WaitFor(t, outputWait, func() bool { return strings.Contains(s.Text(Stderr), "syntax error") }, "a syntax error on stderr")
	input(t, run, "write(2*3);\n")
	s.WaitFor(t, outputWait, func() bool { return s.Text(Stdout) == "6\n" }, "stdout %q", "6\n")
	if err := run.CloseInput(); err != nil {
		t.Fatal(err)
	}
	o := run.Wait()
	assertGone(t, run)
	wantOutcome(t, o, false, "No image output", s)
}

// A session with no input for InteractiveIdle ends as if the input had
// ended: asy exits and the picture it drew makes it a success.
func TestInteractiveIdle(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{InteractiveIdle: time.Second})
	run, s := start(t, context.Background(), r, interactiveTask())
	input(t, run, "draw((0,0)--(1,1));\n")
	began := time.Now()
	o := run.Wait()
	took := time.Since(began)
	assertGone(t, run)
	wantOutcome(t, o, true, "", s)
	if took < 900*time.Millisecond || took > 10*time.Second {
		t.Fatalf("ended %v after the last input, want about the idle time of 1s", took)
	}
	if s.ImageCount() != 1 {
		t.Fatalf("%d images", s.ImageCount())
	}
	if out := s.Text(Stdout); !strings.HasSuffix(out, IdleNotice(time.Second)) {
		t.Fatalf("output %q does not end with the idle notice", out)
	}
}

// A session that ends by CloseInput gets no idle notice.
func TestInteractiveNoIdleNoticeOnClose(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	run, s := start(t, context.Background(), r, interactiveTask())
	input(t, run, "write(7);\n")
	s.WaitFor(t, outputWait, func() bool { return s.Text(Stdout) == "7\n" }, "stdout %q", "7\n")
	if err := run.CloseInput(); err != nil {
		t.Fatal(err)
	}
	run.Wait()
	if out := s.Text(Stdout); strings.Contains(out, "usher:") {
		t.Fatalf("output %q has a notice", out)
	}
}

// The wall clock still bounds an interactive session that keeps asy busy.
func TestInteractiveTimeLimit(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	task := interactiveTask()
	task.Timeout = 1500 * time.Millisecond
	run, s := start(t, context.Background(), r, task)
	input(t, run, "while(true) {}\n")
	o := run.Wait()
	assertGone(t, run)
	wantOutcome(t, o, false, "Execution aborted due to the time limit (1500ms)", s)
}

func TestInputErrors(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{Upload: 64})
	run, s := start(t, context.Background(), r, mainTask(figure))
	if err := run.Input([]byte("draw(unitcircle);\n")); err == nil {
		t.Error("Input accepted by a task that is not interactive")
	}
	if err := run.CloseInput(); err == nil {
		t.Error("CloseInput accepted by a task that is not interactive")
	}
	wantOutcome(t, run.Wait(), true, "", s)

	run, s = start(t, context.Background(), r, interactiveTask())
	if err := run.Input([]byte(strings.Repeat(" ", 65))); err == nil {
		t.Error("more than Limits.Upload bytes of input accepted at once")
	}
	input(t, run, "write(1);\n")
	s.WaitFor(t, outputWait, func() bool { return s.Text("") == "1\n" }, "output %q", "1\n")
	if err := run.CloseInput(); err != nil {
		t.Fatal(err)
	}
	run.Wait()
	if err := run.Input([]byte("write(2);\n")); err == nil {
		t.Error("Input accepted after the end")
	}
}
