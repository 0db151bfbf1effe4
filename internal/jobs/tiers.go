package jobs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/sched"
)

// ParseTiers reads a tier configuration such as
// "fast=1m,medium=10m@50%,slow=1h@4": each tier is name=duration, from the
// fastest; every tier but the first has a limit, a number of running jobs
// or a share of all agent slots.
func ParseTiers(s string) ([]sched.Tier, error) {
	var tiers []sched.Tier
	for i, item := range strings.Split(s, ",") {
		t, err := parseTier(strings.TrimSpace(item), i == 0)
		if err != nil {
			return nil, fmt.Errorf("tier %d (%q): %w", i+1, item, err)
		}
		tiers = append(tiers, t)
	}
	if _, err := sched.New(sched.Config{Tiers: tiers, Now: time.Now}); err != nil {
		return nil, err
	}
	return tiers, nil
}

func parseTier(item string, first bool) (sched.Tier, error) {
	name, rest, ok := strings.Cut(item, "=")
	if !ok || name == "" || name == "default" {
		return sched.Tier{}, fmt.Errorf("want name=duration (the name %q is reserved)", "default")
	}
	dur, limit, hasLimit := strings.Cut(rest, "@")
	d, err := time.ParseDuration(dur)
	if err != nil || d <= 0 {
		return sched.Tier{}, fmt.Errorf("bad duration %q", dur)
	}
	t := sched.Tier{Name: name, Duration: d}
	switch {
	case first && hasLimit:
		return t, fmt.Errorf("the fastest tier uses every slot; it takes no limit")
	case first:
		return t, nil
	case !hasLimit:
		return t, fmt.Errorf("needs a limit: name=duration@N or name=duration@P%%")
	}
	if p, ok := strings.CutSuffix(limit, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 || f > 100 {
			return t, fmt.Errorf("bad share %q", limit)
		}
		t.Share = f / 100
		return t, nil
	}
	n, err := strconv.Atoi(limit)
	if err != nil || n < 1 {
		return t, fmt.Errorf("bad limit %q", limit)
	}
	t.Limit = n
	return t, nil
}
