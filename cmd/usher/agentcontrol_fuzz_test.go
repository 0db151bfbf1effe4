package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/jobtype"
)

// Any control line is taken or refused with an error, never a panic; a
// snooze taken is within 1 ms..a week and a cancel only comes from a
// cancel line.
func FuzzControlLine(f *testing.F) {
	for _, seed := range []string{"progress 0.5 half", "progress x", "result {\"a\":1}", "result {",
		"snooze 100", "snooze -1", "snooze 99999999999999999999", "cancel", "cancel bad host", "", "jump", "progress 1e400"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c := &control{done: make(chan struct{})}
		err := c.apply(context.Background(), line)
		word, _, _ := strings.Cut(strings.TrimRight(line, "\r"), " ")
		if c.snooze != 0 && (err != nil || c.snooze < time.Millisecond || c.snooze > jobtype.MaxSnoozeMs*time.Millisecond) {
			t.Fatalf("%q: snooze %s with error %v", line, c.snooze, err)
		}
		if c.cancel != nil && word != "cancel" {
			t.Fatalf("%q: a cancel from another word", line)
		}
		if err == nil && word != "snooze" && word != "cancel" {
			t.Fatalf("%q: taken without a job to report to", line)
		}
	})
}
