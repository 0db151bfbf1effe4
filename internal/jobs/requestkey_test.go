package jobs

import (
	"slices"
	"strconv"
	"testing"
)

// runsOf and FormatRuns/ParseRuns keep a request's ids exactly: any ids
// survive the trip through the stores' text, and consecutive ids take one
// run.
func FuzzRequestKeyRuns(f *testing.F) {
	f.Add([]byte{1, 1, 1, 5, 2}, int64(100))
	f.Add([]byte{}, int64(1))
	f.Add([]byte{0, 0, 3}, int64(1<<40))
	f.Fuzz(func(t *testing.T, steps []byte, start int64) {
		if len(steps) == 0 || start < 1 || start > 1<<50 {
			return
		}
		// Each step moves from the id before: 1 continues a run, others
		// jump (ids stay positive).
		ids := make([]string, len(steps))
		n := start
		for i, s := range steps {
			if i > 0 {
				n = max(1, n+int64(s)-1)
			}
			ids[i] = strconv.FormatInt(n, 10)
		}
		runs := runsOf(ids)
		back, err := ParseRuns(FormatRuns(runs))
		if err != nil {
			t.Fatalf("ParseRuns(%q): %v", FormatRuns(runs), err)
		}
		var got []string
		for _, r := range back {
			for i := range int64(r.N) {
				got = append(got, strconv.FormatInt(r.First+i, 10))
			}
		}
		if !slices.Equal(got, ids) || runsLen(back) != len(ids) {
			t.Fatalf("ids %v came back as %v (runs %v)", ids, got, back)
		}
		for i := 1; i < len(runs); i++ {
			if runs[i-1].First+int64(runs[i-1].N) == runs[i].First {
				t.Fatalf("runs %v: run %d continues the one before it", runs, i)
			}
		}
	})
}

// ParseRuns refuses what FormatRuns cannot have written.
func TestParseRunsRefusesGarbage(t *testing.T) {
	for _, s := range []string{"", "1", "1+", "+2", "1+0", "0+1", "-1+1", "1+2,", "1+2,,3+1", "a+1", "1+2+3", "1 +2"} {
		if runs, err := ParseRuns(s); err == nil {
			t.Errorf("ParseRuns(%q) = %v; want an error", s, runs)
		}
	}
	if runs, err := ParseRuns("7+3,2+1"); err != nil || !slices.Equal(runs, []IDRun{{7, 3}, {2, 1}}) {
		t.Errorf("ParseRuns(7+3,2+1) = %v, %v", runs, err)
	}
}
