package jobtype

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseRate reads a key rate: a positive count of starts per second,
// minute or hour, as "100/s", "6000/m" or "10/h".
func ParseRate(s string) (count int, per time.Duration, err error) {
	n, unit, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q: want COUNT/UNIT, as 100/s, 6000/m or 10/h", s)
	}
	switch unit {
	case "s":
		per = time.Second
	case "m":
		per = time.Minute
	case "h":
		per = time.Hour
	default:
		return 0, 0, fmt.Errorf("rate %q: unit %q is not s, m or h", s, unit)
	}
	count, err = strconv.Atoi(n)
	if err != nil || count < 1 || strings.HasPrefix(n, "+") {
		return 0, 0, fmt.Errorf("rate %q: %q is not a count of at least 1", s, n)
	}
	if int64(count) > int64(per) {
		return 0, 0, fmt.Errorf("rate %q: more than one start a nanosecond", s)
	}
	return count, per, nil
}
