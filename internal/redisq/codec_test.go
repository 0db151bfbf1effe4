package redisq

import (
	"fmt"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
)

func TestControlRoundTrip(t *testing.T) {
	for _, c := range []Control{
		{Kind: ControlTimeout, Timeout: 3 * time.Second},
		{Kind: ControlDenied, Text: "no free backend for an interactive task"},
		{Kind: ControlEnd, Text: "Backend went away during the task"},
	} {
		got, err := ParseControl(c.String())
		if err != nil || got != c {
			t.Errorf("ParseControl(%q) = %+v, %v; want %+v", c.String(), got, err, c)
		}
	}
}

func TestParseControlRefusesGarbage(t *testing.T) {
	for _, s := range []string{"", "timeout", "timeout -5", "timeout 0", "timeout x", "end", "end ", "halt now", "denied"} {
		if c, err := ParseControl(s); err == nil {
			t.Errorf("ParseControl(%q) = %+v, want an error", s, c)
		}
	}
}

func TestEstimateRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		wait  time.Duration
		known bool
	}{{0, true}, {1500 * time.Millisecond, true}, {90 * time.Second, true}, {0, false}} {
		w, k, err := ParseEstimate(FormatEstimate(tc.wait, tc.known))
		if err != nil || w != tc.wait || k != tc.known {
			t.Errorf("round trip of %v/%v = %v/%v, %v", tc.wait, tc.known, w, k, err)
		}
	}
	for _, s := range []string{"", "soon", "-1", "NaN", "-inf"} {
		if _, _, err := ParseEstimate(s); err == nil {
			t.Errorf("ParseEstimate(%q) accepted", s)
		}
	}
}

func TestTaskOptionsRoundTrip(t *testing.T) {
	task := sandbox.Task{Timeout: 10 * time.Second, Format: "pdf", SeparateStderr: true, Verbosity: 2,
		Files: []sandbox.File{{Name: "a.asy", Data: []byte("x"), Main: true}, {Name: "b.asy", Data: []byte("y")}}}
	h := map[string]string{}
	for k, v := range OptionsOf(task).Fields() {
		h[k] = fmt.Sprint(v)
	}
	o, err := ParseOptions(h)
	if err != nil {
		t.Fatal(err)
	}
	got := o.Task(map[string]string{"a.asy": "x", "b.asy": "y"})
	if got.Timeout != task.Timeout || got.Format != "pdf" || !got.SeparateStderr || got.Verbosity != 2 || len(got.Files) != 2 {
		t.Fatalf("task = %+v", got)
	}
	for _, f := range got.Files {
		if f.Main != (f.Name == "a.asy") {
			t.Fatalf("main flag of %s = %v", f.Name, f.Main)
		}
	}
	// The scheduler's timeout bounds a default task.
	h[FieldDuration], h[FieldTimeout] = "0", "30000"
	o, _ = ParseOptions(h)
	if got := o.Task(nil); got.Timeout != 30*time.Second {
		t.Fatalf("default task's limit = %v, want the scheduler's 30 s", got.Timeout)
	}
}

// An interactive task keeps the client's timeout (no tier bounds it), and
// a bare shell has no file and no main.
func TestInteractiveTaskKeepsItsTimeout(t *testing.T) {
	for _, want := range []time.Duration{3 * time.Second, 0} {
		h := map[string]string{}
		for k, v := range OptionsOf(sandbox.Task{Interactive: true, Timeout: want}).Fields() {
			h[k] = fmt.Sprint(v)
		}
		o, err := ParseOptions(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Task(nil); !got.Interactive || got.Timeout != want || len(got.Files) != 0 {
			t.Fatalf("interactive task = %+v, want timeout %v", got, want)
		}
	}
}

func TestParseOptionsRefusesBadFields(t *testing.T) {
	for _, h := range []map[string]string{
		{},
		{FieldDuration: "-1"},
		{FieldDuration: "abc"},
		{FieldDuration: "0", FieldVerbosity: "loud"},
		{FieldDuration: "0", FieldTimeout: "0"},
	} {
		if _, err := ParseOptions(h); err == nil {
			t.Errorf("ParseOptions(%v) accepted", h)
		}
	}
}

func FuzzParsers(f *testing.F) {
	for _, s := range []string{"timeout 3000", "end gone", "denied x", "1.5", "inf", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := ParseControl(s); err == nil {
			again, err := ParseControl(c.String())
			if err != nil || again != c {
				t.Fatalf("control %q → %+v does not round-trip: %+v, %v", s, c, again, err)
			}
		}
		if w, k, err := ParseEstimate(s); err == nil && (w < 0 || (!k && w != 0)) {
			t.Fatalf("estimate %q → %v/%v", s, w, k)
		}
		_, _ = ParseOptions(map[string]string{FieldDuration: s, FieldTimeout: s, FieldVerbosity: s})
	})
}
