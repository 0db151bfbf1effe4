package main

import (
	"strings"
	"testing"
	"time"
)

// A job that starts before its due time (a server that ignored runAt)
// fails the measurement instead of giving a lateness figure.
func TestLatenessEarlyStartFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		due     time.Duration // from now
		allowed time.Duration
		fails   bool
	}{
		{"on time", -time.Millisecond, 0, false},
		{"late", -2 * time.Second, 0, false},
		{"early", time.Hour, 0, true},
		{"early within the allowance", 500 * time.Millisecond, time.Second, false},
		{"early past the allowance", 2 * time.Second, time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHook(1, false)
			h.late = &lateHook{early: tc.allowed}
			h.beginJob(payloadDue(time.Now().Add(tc.due)))
			h.end()
			select {
			case err := <-h.failed:
				if !tc.fails {
					t.Fatalf("failed: %v", err)
				}
				if !strings.Contains(err.Error(), "before its due time") {
					t.Fatalf("error %q does not say the job started early", err)
				}
			default:
				if tc.fails {
					t.Fatal("an early start did not fail the measurement")
				}
			}
			if len(h.late.late) != 1 {
				t.Fatalf("recorded %d lateness samples, want 1", len(h.late.late))
			}
		})
	}
}

// An immediate job (no due time in its payload) records no lateness.
func TestLatenessImmediateJobIgnored(t *testing.T) {
	h := newHook(1, false)
	h.late = &lateHook{}
	h.beginJob("")
	if len(h.late.late) != 0 {
		t.Fatalf("an immediate job recorded lateness %v", h.late.late)
	}
}

func TestParseWaiting(t *testing.T) {
	for _, tc := range []struct {
		in    string
		usher int
		river int
		err   bool
	}{
		{in: "1000000", usher: 1000000, river: 1000000},
		{in: "100000,usher=1000000", usher: 1000000, river: 100000},
		{in: "usher=5", usher: 5, river: 0},
		{in: "x", err: true},
		{in: "usher=-1", err: true},
	} {
		m, err := parseWaiting(tc.in)
		if (err != nil) != tc.err {
			t.Fatalf("parseWaiting(%q): error %v, want error %v", tc.in, err, tc.err)
		}
		if err != nil {
			continue
		}
		c := lateConfig{waiting: m}
		if got := c.waitingFor("usher"); got != tc.usher {
			t.Errorf("parseWaiting(%q): usher %d, want %d", tc.in, got, tc.usher)
		}
		if got := c.waitingFor("river"); got != tc.river {
			t.Errorf("parseWaiting(%q): river %d, want %d", tc.in, got, tc.river)
		}
	}
}
