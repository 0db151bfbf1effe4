package jobs

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// ParseCron never panics, and what it accepts has a schedule and a
// location; what it refuses names spec or timezone.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"0 * * * *", "*/15 9-17 * * MON-FRI", "@hourly", "@every 90s", "@every -1s", "61 * * * *",
		"0 0 30 2 *", "TZ=UTC * * * * *", "", "* * * * 0-", "5/ * * * *", "@every 0", "1-0 * * * *"} {
		f.Add(s, "UTC")
	}
	f.Add("0 * * * *", "Europe/Paris")
	f.Add("0 * * * *", "Local")
	f.Fuzz(func(t *testing.T, spec, tz string) {
		s, loc, err := ParseCron(spec, tz)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "spec: ") && !strings.HasPrefix(msg, "timezone: ") {
				t.Fatalf("ParseCron(%q, %q) = %v; want an error naming spec or timezone", spec, tz, err)
			}
			return
		}
		if s == nil || loc == nil {
			t.Fatalf("ParseCron(%q, %q) accepted with no schedule or location", spec, tz)
		}
		c := &cronEntry{sched: s, loc: loc}
		c.after(time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC))
	})
}

// latestDue is the last tick at or before now, the same as stepping
// through every tick from the first, for schedules of every kind, time
// zones with daylight saving of an hour, and outages from seconds to
// months. (robfig/cron steps over a tick at the half-hour daylight-saving
// change of Australia/Lord_Howe: docs/design.md, "Periodic jobs".)
func TestLatestDueIsTheLastTickBeforeNow(t *testing.T) {
	specs := []string{"* * * * *", "0 * * * *", "*/7 9-17 * * MON-FRI", "30 2 * * *", "0 0 1 * *", "@every 90s", "@every 1h", "@weekly"}
	zones := []string{"UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100; i++ {
		spec, tz := specs[r.IntN(len(specs))], zones[r.IntN(len(zones))]
		s, loc, err := ParseCron(spec, tz)
		if err != nil {
			t.Fatal(err)
		}
		c := &cronEntry{sched: s, loc: loc}
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(300 * 24 * time.Hour))))
		first := c.after(from)
		now := first.Add(time.Duration(r.Int64N(int64(20*24*time.Hour))) >> r.IntN(10)) // mostly short, some long
		want := first
		for n := c.after(want); !n.After(now); n = c.after(want) {
			want = n
		}
		if got := c.latestDue(first, now); !got.Equal(want) {
			t.Fatalf("%s in %s, first %v, now %v: latestDue %v; want %v", spec, tz, first, now, got, want)
		}
	}
}
