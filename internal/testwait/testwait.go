// Package testwait lets a test wait, with a deadline, for something that
// happens on another goroutine or in another process: a condition to hold
// or a value to arrive on a channel. When the deadline passes, the test
// fails with a message that says what did not happen, instead of hanging
// until the test binary's own timeout. It uses the standard library only,
// so any test may import it.
package testwait

import (
	"fmt"
	"testing"
	"time"
)

// First and longest pause between two checks of a condition.
const (
	firstPause = time.Millisecond
	maxPause   = 16 * time.Millisecond
)

// Eventually checks cond until it returns true. If timeout passes first,
// it fails the test with t.Fatalf; the message, format and args as for
// fmt.Sprintf, states what was waited for (e.g. "every job finished").
// Arguments are formatted at the failure, so a fmt.Stringer such as a log
// buffer shows its final content. Call it from the test's goroutine only,
// as t.Fatalf requires; cond may call t.Fatal itself.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if err := Until(timeout, cond, format, args...); err != nil {
		t.Fatal(err)
	}
}

// Until checks cond until it returns true, pausing a little longer after
// each miss, and returns nil; if timeout passes first, it returns an error
// that says what did not happen. It is Eventually for goroutines other
// than the test's, which must report with t.Error and return.
func Until(timeout time.Duration, cond func() bool, format string, args ...any) error {
	deadline := time.Now().Add(timeout)
	for pause := firstPause; !cond(); pause = min(2*pause, maxPause) {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%s: not within %v", fmt.Sprintf(format, args...), timeout)
		}
		time.Sleep(min(pause, left)) // polling a condition, with a deadline
	}
	return nil
}

// Receive returns the next value from ch, or the zero value once ch is
// closed. If timeout passes first, it fails the test with t.Fatalf, the
// message (format and args) stating what was waited for. Call it from
// the test's goroutine only.
func Receive[T any](t testing.TB, timeout time.Duration, ch <-chan T, format string, args ...any) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: not within %v", fmt.Sprintf(format, args...), timeout)
		var zero T
		return zero
	}
}
