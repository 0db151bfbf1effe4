package jobtype

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in    string
		count int
		per   time.Duration
		err   string
	}{
		{in: "100/s", count: 100, per: time.Second},
		{in: "6000/m", count: 6000, per: time.Minute},
		{in: "10/h", count: 10, per: time.Hour},
		{in: "1000000000/s", count: 1_000_000_000, per: time.Second},
		{in: "1000000001/s", err: "more than one start a nanosecond"},
		{in: "0/s", err: "not a count of at least 1"},
		{in: "-5/s", err: "not a count of at least 1"},
		{in: "+5/s", err: "not a count of at least 1"},
		{in: "5", err: "want COUNT/UNIT"},
		{in: "", err: "want COUNT/UNIT"},
		{in: "5/d", err: `unit "d" is not s, m or h`},
		{in: "5/S", err: `unit "S" is not s, m or h`},
		{in: " 5/s", err: "not a count"},
		{in: "5/s/s", err: `unit "s/s"`},
	} {
		count, per, err := ParseRate(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseRate(%q) = %v; want an error with %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || count != tc.count || per != tc.per):
			t.Errorf("ParseRate(%q) = %d, %v, %v; want %d per %v", tc.in, count, per, err, tc.count, tc.per)
		}
	}
}

// FuzzParseRate: whatever ParseRate accepts is a positive count per
// second, minute or hour, at most one a nanosecond, that prints back to
// the same rate.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100/s", "6000/m", "10/h", "0/s", "1/d", "9999999999/s", "/s", "1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		count, per, err := ParseRate(s)
		if err != nil {
			return
		}
		if count < 1 || int64(count) > int64(per) {
			t.Fatalf("ParseRate(%q) = %d per %v", s, count, per)
		}
		unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[per]
		if unit == "" {
			t.Fatalf("ParseRate(%q): period %v", s, per)
		}
		c2, p2, err := ParseRate(strconv.Itoa(count) + "/" + unit)
		if err != nil || c2 != count || p2 != per {
			t.Fatalf("ParseRate(%q) = %d/%s does not print back: %d %v %v", s, count, unit, c2, p2, err)
		}
	})
}
