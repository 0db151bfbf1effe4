package testwait_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/testwait"
)

func TestUntil(t *testing.T) {
	tests := []struct {
		name    string
		holdsAt int32 // the check at which cond first holds; 0: never
		wantErr string
	}{
		{name: "at once", holdsAt: 1},
		{name: "after some checks", holdsAt: 5},
		{name: "never", wantErr: "the flag is set: not within 30ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var checks atomic.Int32
			cond := func() bool { return checks.Add(1) == tc.holdsAt }
			err := testwait.Until(30*time.Millisecond, cond, "the %s is set", "flag")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Until = %v; want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Until = %v; want %q", err, tc.wantErr)
			}
		})
	}
}

func TestEventuallyHoldsAfterAnotherGoroutineActs(t *testing.T) {
	var done atomic.Bool
	go func() { time.Sleep(5 * time.Millisecond); done.Store(true) }() // the other goroutine's work
	testwait.Eventually(t, 10*time.Second, done.Load, "the goroutine set the flag")
}

func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	go func() { ch <- 7 }()
	if v := testwait.Receive(t, 10*time.Second, ch, "a value"); v != 7 {
		t.Fatalf("Receive = %d; want 7", v)
	}
	close(ch)
	if v := testwait.Receive(t, 10*time.Second, ch, "the close"); v != 0 {
		t.Fatalf("Receive of a closed channel = %d; want 0", v)
	}
}
