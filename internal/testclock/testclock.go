// Package testclock is the clock tests inject where time decides an
// outcome (retentions, minimum ages, expiries): it stands still until the
// test advances it, and any number of goroutines may read it meanwhile.
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable time. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock that reads start until it is advanced.
func New(start time.Time) *Clock { return &Clock{t: start} }

// Now is the clock's time; pass it where a func() time.Time is asked for.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t (forward, as time goes).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
