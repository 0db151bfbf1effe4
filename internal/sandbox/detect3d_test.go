package sandbox

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// The modules that load three, read from the installed asy: its 3D modules
// are there, its 2D ones are not.
func TestModules3D(t *testing.T) {
	t.Parallel()
	dir, err := asySysdir("/usr/bin/asy")
	if err != nil {
		t.Fatal(err)
	}
	mods, err := modules3D(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"three", "graph3", "solids", "tube", "contour3", "smoothcontour3"} {
		if !slices.Contains(mods, want) {
			t.Errorf("%s missing from %v", want, mods)
		}
	}
	for _, not := range []string{"graph", "geometry", "palette", "plain", "math"} {
		if slices.Contains(mods, not) {
			t.Errorf("%s (2D) in %v", not, mods)
		}
	}
}

func TestClosure(t *testing.T) {
	t.Parallel()
	deps := map[string][]string{"a": {"b"}, "b": {"three"}, "c": {"graph"}, "d": {"a", "c"}}
	if got, want := closure(deps, "three"), []string{"a", "b", "d", "three"}; !slices.Equal(got, want) {
		t.Fatalf("closure %v, want %v", got, want)
	}
}

// Which tasks get a display: those naming a module that loads three (in
// any of their files), those that may build code at run time, interactive
// ones, and all of them when the modules could not be read.
func TestNeedsDisplay(t *testing.T) {
	t.Parallel()
	rule, err := newRule3D("/usr/bin/asy")
	if err != nil {
		t.Fatal(err)
	}
	two := func(main, other string) Task {
		return Task{Files: []File{{Name: "main.asy", Data: []byte(main), Main: true}, {Name: "mymod.asy", Data: []byte(other)}}}
	}
	for _, tc := range []struct {
		name string
		task Task
		rule rule3D
		want bool
	}{
		{"2D", mainTask(figure + `label("$x^2$");`), rule, false},
		{"2D with graph and an object", mainTask(`import graph; object o; draw(graph(sin, 0, 1));`), rule, false},
		{"import three", mainTask(`import three; draw(unitsphere);`), rule, true},
		{"import graph3", mainTask(`import graph3;`), rule, true},
		{"quoted path", mainTask(`import "three.asy" as t;`), rule, true},
		{"access solids", mainTask(`access solids;`), rule, true},
		{"from tube", mainTask(`from tube access tube;`), rule, true},
		{"part of three", mainTask(`import three_surface;`), rule, true},
		{"in a comment", mainTask(figure + `// three`), rule, true},
		{"eval", mainTask(`eval("import thr" + "ee;", true);`), rule, true},
		{"execute", mainTask(`execute("mine");`), rule, true},
		{"in an imported task file", two(`import mymod;`, `import three;`), rule, true},
		{"interactive", Task{Interactive: true}, rule, true},
		{"modules unknown", mainTask(figure), rule3D{always: true}, true},
		{"zero rule", mainTask(figure), rule3D{}, true},
	} {
		if got := tc.rule.needsDisplay(tc.task); got != tc.want {
			t.Errorf("%s: needsDisplay %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A 2D task's PID 1 starts no Xvfb; a 3D task's does, unless it asks for
// html or v3d, which asy writes without rendering.
func TestDisplayOnlyFor3D(t *testing.T) {
	t.Parallel()
	r := &Runner{tools: tools{sh: "/bin/sh", xvfb: "/usr/bin/Xvfb"}}
	var err error
	if r.rule3D, err = newRule3D("/usr/bin/asy"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src, format string
		want        bool
	}{
		{figure, FormatPNG, false}, {figures3D[0].src, FormatPNG, true}, {figures3D[0].src, FormatEPS, true},
		{figures3D[0].src, FormatHTML, false}, {figures3D[0].src, FormatV3D, false},
	} {
		task := mainTask(tc.src)
		task.Format = tc.format
		argv := r.wrapCommand("/tmp", task, false, []string{"asy"})
		if got := slices.Contains(argv, "/usr/bin/Xvfb"); got != tc.want {
			t.Errorf("%s %q: Xvfb started %v, want %v (%q)", tc.format, tc.src, got, tc.want, argv)
		}
	}
}

// An Xvfb that cannot start fails the task with code 70 and says so, in
// the sandbox and in insecure mode (a stand-in Xvfb that exits at once),
// and a task still renders afterwards.
func TestDisplayThatCannotStartIsReported(t *testing.T) {
	for _, insecure := range []bool{false, true} {
		t.Run(fmt.Sprint("insecure=", insecure), func(t *testing.T) {
			r := newRunner(t, Limits{})
			r.insecure, r.log = insecure, slog.New(slog.DiscardHandler)
			r.tools.xvfb = "/usr/bin/false"
			o, s := runTask(t, r, mainTask(figures3D[0].src))
			wantOutcome(t, o, false, exitCodeText(displayExitCode), s)
			if !strings.Contains(s.Text(""), "the virtual display for 3D rendering (Xvfb) did not start") {
				t.Fatalf("output %q does not say that Xvfb did not start", s.Text(""))
			}
		})
	}
}
