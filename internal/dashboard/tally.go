package dashboard

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Outcomes of a task, as the history counts them.
const (
	// OutcomeDone is a task that completed with success, by a run or from
	// the result cache.
	OutcomeDone = "done"
	// OutcomeFailed is a task that ran and did not succeed: asy failed,
	// its time ran out, or the server ended it (backend gone, halted).
	OutcomeFailed = "failed"
)

// Counts are what the queue servers saw happen to tasks in one interval:
// ends by outcome, denials by reason, result cache lookups, and the
// distributions of compile times and queue waits. A task the client
// abandoned counts in no outcome.
type Counts struct {
	Done, Failed int64
	// Denials counts denials by reason: request, idle, queue_full,
	// no_backend, other (the labels of usher_asy_denied_total).
	Denials     map[string]int64
	CacheHits   int64
	CacheMisses int64
	// Compile is how long asy ran, for tasks that ran (not cached ones);
	// Wait is how long a queued task waited for its backend.
	Compile, Wait Histogram
}

// Merge adds o to c.
func (c *Counts) Merge(o Counts) {
	c.Done += o.Done
	c.Failed += o.Failed
	c.CacheHits += o.CacheHits
	c.CacheMisses += o.CacheMisses
	for r, n := range o.Denials {
		if c.Denials == nil {
			c.Denials = map[string]int64{}
		}
		c.Denials[r] += n
	}
	c.Compile.Merge(o.Compile)
	c.Wait.Merge(o.Wait)
}

// Field names of Counts as a Redis hash (multi-node mode: queue servers
// add to it with HINCRBY, the leading scheduler reads it).
const (
	fieldDone        = "done"
	fieldFailed      = "failed"
	fieldCacheHits   = "cache.hit"
	fieldCacheMisses = "cache.miss"
	prefixDenied     = "denied."
	prefixCompile    = "compile."
	prefixWait       = "wait."
)

// Fields returns c's nonzero counts by field name.
func (c Counts) Fields() map[string]int64 {
	f := map[string]int64{}
	put := func(name string, n int64) {
		if n != 0 {
			f[name] = n
		}
	}
	put(fieldDone, c.Done)
	put(fieldFailed, c.Failed)
	put(fieldCacheHits, c.CacheHits)
	put(fieldCacheMisses, c.CacheMisses)
	for r, n := range c.Denials {
		put(prefixDenied+r, n)
	}
	for k := range HistogramBuckets {
		put(prefixCompile+strconv.Itoa(k), c.Compile[k])
		put(prefixWait+strconv.Itoa(k), c.Wait[k])
	}
	return f
}

// CountsOfFields reads Counts from a hash Fields wrote. A field it does
// not know, or a value that is not a count, is an error: the caller skips
// the hash rather than show wrong figures.
func CountsOfFields(f map[string]string) (Counts, error) {
	var c Counts
	for name, v := range f {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return Counts{}, fmt.Errorf("dashboard counts: field %q: %q is not a count", name, v)
		}
		if err := c.set(name, n); err != nil {
			return Counts{}, err
		}
	}
	return c, nil
}

func (c *Counts) set(name string, n int64) error {
	switch name {
	case fieldDone:
		c.Done = n
	case fieldFailed:
		c.Failed = n
	case fieldCacheHits:
		c.CacheHits = n
	case fieldCacheMisses:
		c.CacheMisses = n
	default:
		return c.setPrefixed(name, n)
	}
	return nil
}

func (c *Counts) setPrefixed(name string, n int64) error {
	if r, ok := strings.CutPrefix(name, prefixDenied); ok && validReason(r) {
		if c.Denials == nil {
			c.Denials = map[string]int64{}
		}
		c.Denials[r] = n
		return nil
	}
	for _, h := range []struct {
		prefix string
		hist   *Histogram
	}{{prefixCompile, &c.Compile}, {prefixWait, &c.Wait}} {
		if s, ok := strings.CutPrefix(name, h.prefix); ok {
			k, err := strconv.Atoi(s)
			if err != nil || k < 0 || k >= HistogramBuckets || strconv.Itoa(k) != s {
				return fmt.Errorf("dashboard counts: field %q: no such bucket", name)
			}
			h.hist[k] = n
			return nil
		}
	}
	return fmt.Errorf("dashboard counts: unknown field %q", name)
}

// DenialReasons are the reasons a denial is counted under.
var DenialReasons = []string{"request", "idle", "queue_full", "no_backend", "other"}

func validReason(r string) bool {
	for _, x := range DenialReasons {
		if r == x {
			return true
		}
	}
	return false
}

// Tally collects Counts by interval as tasks end, for the history. It is
// safe for concurrent use; a nil *Tally records nothing.
type Tally struct {
	every time.Duration
	now   func() time.Time

	mu     sync.Mutex
	counts map[int64]*Counts // by interval index
}

// NewTally returns a tally of intervals of length every, reading the time
// from now (time.Now when nil).
func NewTally(every time.Duration, now func() time.Time) *Tally {
	if now == nil {
		now = time.Now
	}
	return &Tally{every: every, now: now, counts: map[int64]*Counts{}}
}

// add applies f to the counts of the interval under way.
func (t *Tally) add(f func(c *Counts)) {
	if t == nil {
		return
	}
	i := IntervalOf(t.now(), t.every)
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.counts[i]
	if c == nil {
		c = &Counts{}
		t.counts[i] = c
	}
	f(c)
}

// Ended counts a task that ran to an end: done or failed after compile
// (0 for a task that never reached asy).
func (t *Tally) Ended(success bool, compile time.Duration) {
	t.add(func(c *Counts) {
		if success {
			c.Done++
		} else {
			c.Failed++
		}
		if compile > 0 {
			c.Compile.Add(compile)
		}
	})
}

// Denied counts a denial for reason (one of DenialReasons; any other
// counts as "other").
func (t *Tally) Denied(reason string) {
	if !validReason(reason) {
		reason = "other"
	}
	t.add(func(c *Counts) {
		if c.Denials == nil {
			c.Denials = map[string]int64{}
		}
		c.Denials[reason]++
	})
}

// CacheLookup counts a result cache lookup; a hit is also a task done.
func (t *Tally) CacheLookup(hit bool) {
	t.add(func(c *Counts) {
		if hit {
			c.CacheHits++
			c.Done++
		} else {
			c.CacheMisses++
		}
	})
}

// Waited counts how long a queued task waited for its backend.
func (t *Tally) Waited(d time.Duration) {
	t.add(func(c *Counts) { c.Wait.Add(max(d, 0)) })
}

// intervals lists the intervals that have counts.
func (t *Tally) intervals() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Keys(t.counts))
}

// Take removes and returns the counts of interval i.
func (t *Tally) Take(i int64) Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.counts[i]
	delete(t.counts, i)
	if c == nil {
		return Counts{}
	}
	return *c
}

// TakeAll removes and returns every interval's counts, for a queue server
// that hands them on (multi-node mode).
func (t *Tally) TakeAll() map[int64]Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int64]Counts, len(t.counts))
	for i, c := range t.counts {
		out[i] = *c
	}
	clear(t.counts)
	return out
}

// Restore puts counts taken with TakeAll back (their hand-off failed), to
// be handed on with the next ones.
func (t *Tally) Restore(counts map[int64]Counts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, c := range counts {
		cur := t.counts[i]
		if cur == nil {
			cur = &Counts{}
			t.counts[i] = cur
		}
		cur.Merge(c)
	}
}

// Forget drops intervals before i (no sample will take them any more).
func (t *Tally) Forget(i int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.DeleteFunc(t.counts, func(k int64, _ *Counts) bool { return k < i })
}

// IntervalOf is the index of the interval of length every that holds at:
// intervals start at multiples of every since the Unix epoch, so every node
// numbers them alike.
func IntervalOf(at time.Time, every time.Duration) int64 {
	return at.UnixNano() / int64(every)
}
