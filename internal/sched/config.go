package sched

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// MaxTiers is the largest number of duration tiers a configuration may have.
const MaxTiers = 16

// Tier is one duration class (docs/design.md, "Duration tiers and preemption"):
// a job in tier k runs for at most Duration and counts toward the limits of
// tiers 0..k.
//
// Tier 0 (the fastest) is limited by every worker slot; its Limit and Share
// must be zero. Every other tier sets exactly one of Limit (a number of
// running jobs, at least 1) and Share (a fraction of all slots in (0, 1],
// rounded up, at least 1). Effective limits never increase with the tier.
type Tier struct {
	Name     string
	Duration time.Duration
	Limit    int
	Share    float64
}

// DefaultTiers is the design's tier configuration: fast 3 s (every slot),
// medium 10 s (half the slots) and slow 30 s (a quarter of the slots).
func DefaultTiers() []Tier {
	return []Tier{
		{Name: "fast", Duration: 3 * time.Second},
		{Name: "medium", Duration: 10 * time.Second, Share: 0.5},
		{Name: "slow", Duration: 30 * time.Second, Share: 0.25},
	}
}

// Config configures a Scheduler.
type Config struct {
	// Tiers lists the duration tiers from the fastest to the slowest.
	// Empty means DefaultTiers.
	Tiers []Tier
	// Now returns the current time. Required.
	Now func() time.Time
	// Rand is the source of every random choice. Nil means a fixed seed,
	// so that a run is reproducible.
	Rand *rand.Rand
	// Grace, when set, makes the scheduler enforce time limits
	// (docs/design.md, "Leases and retries"): a running job whose
	// attempt ran for its limit (its own Timeout or its tier's duration,
	// whichever is shorter) plus Grace(limit) is failed by Tick. Nil: the
	// driver enforces limits itself.
	Grace func(limit time.Duration) time.Duration
}

// ErrInvalidTiers reports a tier configuration that breaks the rules of Tier.
var ErrInvalidTiers = errors.New("invalid tier configuration")

func validateTiers(tiers []Tier) error {
	if len(tiers) == 0 || len(tiers) > MaxTiers {
		return fmt.Errorf("%w: need 1 to %d tiers, got %d", ErrInvalidTiers, MaxTiers, len(tiers))
	}
	for k, t := range tiers {
		if t.Duration <= 0 {
			return fmt.Errorf("%w: tier %d (%s): duration must be positive", ErrInvalidTiers, k, t.Name)
		}
		if k > 0 && t.Duration <= tiers[k-1].Duration {
			return fmt.Errorf("%w: tier %d (%s): durations must increase", ErrInvalidTiers, k, t.Name)
		}
		if err := validateTierLimit(tiers, k); err != nil {
			return err
		}
	}
	return nil
}

func validateTierLimit(tiers []Tier, k int) error {
	t := tiers[k]
	if k == 0 {
		if t.Limit != 0 || t.Share != 0 {
			return fmt.Errorf("%w: tier 0 (%s) is limited by every slot; leave Limit and Share zero", ErrInvalidTiers, t.Name)
		}
		return nil
	}
	switch {
	case t.Limit != 0 && t.Share != 0:
		return fmt.Errorf("%w: tier %d (%s): set Limit or Share, not both", ErrInvalidTiers, k, t.Name)
	case t.Limit == 0 && t.Share == 0:
		return fmt.Errorf("%w: tier %d (%s): needs a Limit or a Share", ErrInvalidTiers, k, t.Name)
	case t.Share == 0 && t.Limit < 1:
		return fmt.Errorf("%w: tier %d (%s): limit %d is below 1", ErrInvalidTiers, k, t.Name, t.Limit)
	case t.Limit == 0 && (t.Share <= 0 || t.Share > 1):
		return fmt.Errorf("%w: tier %d (%s): share %g is outside (0, 1]", ErrInvalidTiers, k, t.Name, t.Share)
	}
	prev := tiers[k-1]
	if k > 1 && prev.Limit != 0 && t.Limit > prev.Limit {
		return fmt.Errorf("%w: tier %d (%s): limit %d exceeds the faster tier's %d; limits must not increase", ErrInvalidTiers, k, t.Name, t.Limit, prev.Limit)
	}
	if k > 1 && prev.Share != 0 && t.Share > prev.Share {
		return fmt.Errorf("%w: tier %d (%s): share %g exceeds the faster tier's %g; limits must not increase", ErrInvalidTiers, k, t.Name, t.Share, prev.Share)
	}
	return nil
}
