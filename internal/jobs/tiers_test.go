package jobs

import (
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sched"
)

func TestParseTiers(t *testing.T) {
	cases := []struct {
		in   string
		want []sched.Tier
		err  string
	}{
		{in: "fast=1m,medium=10m@50%,slow=1h@4", want: []sched.Tier{
			{Name: "fast", Duration: time.Minute}, {Name: "medium", Duration: 10 * time.Minute, Share: 0.5},
			{Name: "slow", Duration: time.Hour, Limit: 4}}},
		{in: "only=30s", want: []sched.Tier{{Name: "only", Duration: 30 * time.Second}}},
		{in: "fast=1m@2", err: "fastest tier"},
		{in: "fast=1m,slow=1h", err: "needs a limit"},
		{in: "fast=soon", err: "bad duration"},
		{in: "default=1m", err: "reserved"},
		{in: "fast=1m,slow=1h@0", err: "bad limit"},
		{in: "fast=1m,slow=1h@150%", err: "bad share"},
		{in: "fast=1m,slow=30s@1", err: "invalid tier"},
	}
	for _, c := range cases {
		got, err := ParseTiers(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseTiers(%q) = %v, %v; want an error mentioning %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("ParseTiers(%q) = %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("ParseTiers(%q)[%d] = %+v; want %+v", c.in, i, got[i], c.want[i])
			}
		}
	}
}

// Whatever the text, ParseTiers returns an error or tiers the core takes.
func FuzzParseTiers(f *testing.F) {
	for _, s := range []string{"fast=1m,medium=10m@50%,slow=1h@4", "a=1s", "a=1s,b=2s@1%", ",,", "=@%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tiers, err := ParseTiers(s)
		if err != nil {
			return
		}
		if _, err := sched.New(sched.Config{Tiers: tiers, Now: time.Now}); err != nil {
			t.Fatalf("ParseTiers(%q) accepted tiers the core refuses: %v", s, err)
		}
	})
}
