package sched

import (
	"errors"
	"fmt"
	"time"
)

// Rate gates (docs/design.md, "Per-key rate limits"): a key may limit how
// often jobs that hold it start, across all queues, beside (or instead of)
// how many run at once. Each key with a rate has a token bucket of Burst
// tokens that refills at Count tokens per Per; a start takes a token. The
// bucket is kept as its theoretical arrival time (tat, the generic cell
// rate algorithm): with one token every interval ns, a start at now is
// allowed while tat - now <= (burst-1)·interval, and moves tat to
// max(tat, now) + interval. The interval is Per/Count rounded up to a whole
// nanosecond, so the rate held is never above the one asked for. In any
// window of length t, at most Burst + t/interval jobs start.
//
// A gate out of tokens is closed like a full one ("dry") and waits in
// rateWake until its next token is due; Tick (and Dispatch and Pull, which
// open what is due before they look) opens it then, and NextDeadline names
// that time, so that a driver wakes exactly when a token is due. Tokens are
// spent when a job starts and never given back: not when the attempt
// fails, is retried, cancelled or handed back by Release.

// MaxBurst is the largest burst a key rate may have.
const MaxBurst = 1_000_000

// Rate is a key's rate limit: at most Count starts per Per, and Burst
// starts at once when the bucket is full. The zero Rate means none.
type Rate struct {
	Count int
	Per   time.Duration
	Burst int
}

// ErrInvalidRate reports a Rate that breaks the rules of SetKeyRate.
var ErrInvalidRate = errors.New("invalid key rate")

// rateSpec is a Rate as the gates use it.
type rateSpec struct {
	interval int64 // ns between tokens
	burst    int64
}

// rateBucket is a rated key gate's bucket.
type rateBucket struct {
	rateSpec
	tat int64 // theoretical arrival time (ns); full while tat <= now
	due int64 // while dry: when the next token is due
}

// rateMemo is the bucket of a dropped key gate that was not full yet, so
// that a gate made again for the key goes on where it stopped.
type rateMemo struct {
	spec rateSpec
	tat  int64
}

// specOf checks a Rate and converts it.
func specOf(r Rate) (rateSpec, error) {
	switch {
	case r.Count < 1 || r.Per <= 0:
		return rateSpec{}, fmt.Errorf("%w: %d per %s: need at least 1 per a positive period", ErrInvalidRate, r.Count, r.Per)
	case int64(r.Per) < int64(r.Count):
		return rateSpec{}, fmt.Errorf("%w: %d per %s is more than one a nanosecond", ErrInvalidRate, r.Count, r.Per)
	case r.Burst < 1 || r.Burst > MaxBurst:
		return rateSpec{}, fmt.Errorf("%w: burst %d outside 1..%d", ErrInvalidRate, r.Burst, MaxBurst)
	}
	n := int64(r.Count)
	return rateSpec{interval: (int64(r.Per) + n - 1) / n, burst: int64(r.Burst)}, nil
}

// SetKeyRate sets how often jobs that hold a key may start, across all
// queues; the zero Rate removes it. Patterns resolve as in SetKeyLimit
// (an exact key's rate wins; among patterns the longest wins), apart from
// concurrency limits: a key may take its limit from one pattern and its
// rate from another. A key whose rate changes starts with a full bucket.
func (s *Scheduler) SetKeyRate(pattern string, r Rate) error {
	if pattern == "" {
		return fmt.Errorf("%w: empty pattern", ErrInvalidRate)
	}
	var spec rateSpec
	if r != (Rate{}) {
		var err error
		if spec, err = specOf(r); err != nil {
			return fmt.Errorf("key %q: %w", pattern, err)
		}
	}
	s.keyRate.set(pattern, spec, r != (Rate{}))
	for _, g := range s.keyGates {
		want, _ := s.keyRate.lookup(g.name)
		if want != g.rate.rateSpec {
			s.setRate(g, want, 0)
		}
	}
	for k, m := range s.rateMemo {
		if want, _ := s.keyRate.lookup(k); want != m.spec {
			delete(s.rateMemo, k)
		}
	}
	return nil
}

// initRate gives a new key gate its rate, and the bucket its key had when
// an earlier gate of it was dropped.
func (s *Scheduler) initRate(g *gate) {
	spec, ok := s.keyRate.lookup(g.name)
	if !ok {
		return
	}
	var tat int64
	if m, ok := s.rateMemo[g.name]; ok {
		delete(s.rateMemo, g.name)
		if m.spec == spec {
			tat = m.tat
		}
	}
	s.setRate(g, spec, tat)
}

// setRate gives gate g a rate (interval 0: none) and a bucket at tat.
func (s *Scheduler) setRate(g *gate, spec rateSpec, tat int64) {
	g.dry = false // its entry in rateWake goes stale
	g.rate = rateBucket{rateSpec: spec, tat: tat}
	g.rated = spec.interval > 0
	if g.rated {
		s.checkDry(g, s.nowNS())
	}
	s.setClosed(g, g.shouldClose())
}

// takeToken spends a token of a rated gate for a start.
func (s *Scheduler) takeToken(g *gate) {
	now := s.nowNS()
	g.rate.tat = max(g.rate.tat, now) + g.rate.interval
	if s.checkDry(g, now) {
		s.setClosed(g, true)
	}
}

// checkDry marks a rated gate dry when it has no token at now, and files
// it to wake when the next one is due. It reports whether it did.
func (s *Scheduler) checkDry(g *gate, now int64) bool {
	due := g.rate.tat - (g.rate.burst-1)*g.rate.interval
	if due <= now || g.dry {
		return false
	}
	g.dry, g.rate.due = true, due
	s.rateWake.push(due, g)
	return true
}

// openDue opens the gates whose next token is due by now.
func (s *Scheduler) openDue(now int64) {
	for len(s.rateWake) > 0 && s.rateWake[0].at <= now {
		if e := s.rateWake.pop(); rateLive(e) {
			e.v.dry = false
			s.setClosed(e.v, e.v.shouldClose())
		}
	}
}

// openDueNow is openDue before a dispatch or pull, reading the clock only
// when some gate is dry.
func (s *Scheduler) openDueNow() {
	if len(s.rateWake) > 0 {
		s.openDue(s.nowNS())
	}
}

// dropRate forgets a key gate's bucket as the gate is dropped, keeping it
// in rateMemo while it is not full.
func (s *Scheduler) dropRate(g *gate) {
	if !g.rated {
		return
	}
	g.dry = false // its entry in rateWake goes stale
	if g.rate.tat > s.nowNS() {
		if s.rateMemo == nil {
			s.rateMemo = map[string]rateMemo{}
		}
		s.rateMemo[g.name] = rateMemo{spec: g.rate.rateSpec, tat: g.rate.tat}
	}
}

// pruneRateMemo forgets the remembered buckets that are full again.
func (s *Scheduler) pruneRateMemo() {
	if len(s.rateMemo) == 0 {
		return
	}
	now := s.nowNS()
	for k, m := range s.rateMemo {
		if m.tat <= now {
			delete(s.rateMemo, k)
		}
	}
}

// tokens returns a rated gate's tokens at now and when the next one is
// due (0 when the bucket is full).
func (b *rateBucket) tokens(now int64) (int, int64) {
	if b.tat <= now {
		return int(b.burst), 0
	}
	owed := (b.tat - now + b.interval - 1) / b.interval
	have := max(0, b.burst-owed)
	return int(have), b.tat - (b.burst-have-1)*b.interval
}

// rateLive says whether an entry of the rate wake heap (the dry gates by
// when their next token is due) is still dry until its time. An entry goes
// stale when its gate stops being dry otherwise (its rate changed, it was
// dropped); openDue skips stale entries, and they are few. A dropped
// gate's counters record may hold another gate by now.
func rateLive(e timed[*gate]) bool {
	c := e.v.gateCounts
	return c.g == e.v && c.dry && e.v.rate.due == e.at
}
