package sched

import (
	"errors"
	"fmt"
	"slices"
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
// A key out of tokens does not close its gate: the rate is checked only
// when a job that holds the key comes to the head of its queue (head, in
// queue.go). A bucket found there while one of its keys has no token is
// parked: hidden from its queue's ready index alone, listed in the key
// gate's parked buckets, and the gate waits in rateWake until the next
// token is due. Tick (and Dispatch and Pull, which open what is due
// before they look) shows the parked buckets again then, and NextDeadline
// names that time, so that a driver wakes exactly when a token is due
// for a job that waits for it. A dry key's other buckets stay where they
// are, untouched, until one of them comes to a head. Tokens are spent
// when a job starts and never given back: not when the attempt fails, is
// retried, cancelled or handed back by Release.

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
	due int64 // while buckets are parked: when the next token is due
}

// nextToken returns when the bucket next has a token (at or before now:
// it has one now).
func (b *rateBucket) nextToken() int64 { return b.tat - (b.burst-1)*b.interval }

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
		if want != s.gcs.rate(g.num).rateSpec {
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

// setRate gives gate g a rate (interval 0: none) and a bucket at tat; the
// buckets parked on its old bucket are shown again (its key may have a
// token now).
func (s *Scheduler) setRate(g *gate, spec rateSpec, tat int64) {
	s.unpark(g)
	*s.gcs.rate(g.num) = rateBucket{rateSpec: spec, tat: tat}
	if rated := spec.interval > 0; rated != g.rated {
		g.rated = rated
		for _, b := range g.buckets {
			s.flagRated(b)
		}
	}
}

// flagRated marks whether a bucket holds a rated key gate, so that a head
// without one is let through without looking at its gates.
func (s *Scheduler) flagRated(b *bucket) {
	b.flags &^= ratedGates
	for _, r := range b.gates {
		if r.g.rated {
			b.flags |= ratedGates
		}
	}
}

// take spends a token of a rated gate's bucket for a start at now.
func (b *rateBucket) take(now int64) {
	b.tat = max(b.tat, now) + b.interval
}

// dryGate returns a rated key gate of bucket b (which holds one) that has
// no token at the clock's now, or nil.
func (s *Scheduler) dryGate(b *bucket) *gate {
	now := s.nowNS()
	if b.flags&manyGates == 0 {
		if s.gcs.rate(b.gate0-1).nextToken() > now {
			return s.gcs.At(b.gate0 - 1).g
		}
		return nil
	}
	for _, r := range b.gates {
		if g := r.g; g.rated && s.gcs.rate(g.num).nextToken() > now {
			return g
		}
	}
	return nil
}

// park hides bucket b, which came to the head of its queue while its key
// gate g had no token, until g's next token is due.
func (s *Scheduler) park(b *bucket, g *gate) {
	b.flags |= parked
	b.closed++
	if b.closed == 1 {
		s.hide(b)
	}
	if s.parked == nil {
		s.parked = map[*gate][]*bucket{}
	}
	list, ok := s.parked[g]
	if !ok && len(s.parkLists) > 0 {
		list = s.parkLists[len(s.parkLists)-1]
		s.parkLists = s.parkLists[:len(s.parkLists)-1]
	}
	s.parked[g] = append(list, b)
	if !g.dry {
		r := s.gcs.rate(g.num)
		g.dry, r.due = true, r.nextToken()
		s.rateWake.push(r.due, g)
	}
}

// unpark shows again the buckets parked on gate g; its entry in rateWake
// goes stale.
func (s *Scheduler) unpark(g *gate) {
	if !g.dry {
		return
	}
	g.dry = false
	list := s.parked[g]
	for i, b := range list {
		list[i] = nil
		b.flags &^= parked
		b.closed--
		if b.closed == 0 {
			s.show(b)
		}
	}
	delete(s.parked, g)
	s.parkLists = append(s.parkLists, list[:0])
}

// unparkDropped takes a bucket about to be dropped out of the parked list
// of the gate it is parked on.
func (s *Scheduler) unparkDropped(b *bucket) {
	if b.flags&parked == 0 {
		return
	}
	for _, r := range b.gates {
		g := r.g
		if i := slices.Index(s.parked[g], b); i >= 0 {
			if rest := slices.Delete(s.parked[g], i, i+1); len(rest) > 0 {
				s.parked[g] = rest
			} else {
				delete(s.parked, g)
				g.dry = false
			}
			return
		}
	}
}

// openDue shows the buckets parked on gates whose next token is due by
// now.
func (s *Scheduler) openDue(now int64) {
	for len(s.rateWake) > 0 && s.rateWake[0].at <= now {
		if e := s.rateWake.pop(); s.rateLive(e) {
			s.unpark(e.v)
		}
	}
}

// openDueNow is openDue before a dispatch or pull, reading the clock only
// when some bucket is parked.
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
	if r := s.gcs.rate(g.num); r.tat > s.nowNS() {
		if s.rateMemo == nil {
			s.rateMemo = map[string]rateMemo{}
		}
		s.rateMemo[g.name] = rateMemo{spec: r.rateSpec, tat: r.tat}
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

// rateLive says whether an entry of the rate wake heap (the gates with
// parked buckets, by when their next token is due) still has them parked
// until its time. An entry goes stale when its gate's buckets are shown
// otherwise (its rate changed, they were dropped); openDue skips stale
// entries, and they are few. A dropped
// gate's counters record may hold another gate by now.
func (s *Scheduler) rateLive(e timed[*gate]) bool {
	c := e.v.gateCounts
	return c.g == e.v && c.dry && s.gcs.rate(c.num).due == e.at
}
