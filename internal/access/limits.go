package access

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate is a number of requests per period: "30/m" is 30 a minute, and up
// to 30 at once after a quiet minute. The zero Rate is no limit.
type Rate struct {
	N   int
	Per time.Duration
}

// ParseRate reads "N/s", "N/m" or "N/h" (also "N/second", "N/minute",
// "N/hour"); "0" turns the limit off.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "" {
		return Rate{}, nil
	}
	num, unit, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	per, known := map[string]time.Duration{"s": time.Second, "second": time.Second, "m": time.Minute,
		"min": time.Minute, "minute": time.Minute, "h": time.Hour, "hour": time.Hour}[strings.TrimSpace(unit)]
	if !ok || err != nil || n < 0 || n > 1_000_000 || !known {
		return Rate{}, fmt.Errorf("rate %q: give N/s, N/m or N/h (0 for no limit)", s)
	}
	if n == 0 {
		return Rate{}, nil
	}
	return Rate{N: n, Per: per}, nil
}

// String prints the rate as ParseRate reads it.
func (r Rate) String() string {
	if r.N == 0 {
		return "0"
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	if unit == "" {
		return fmt.Sprintf("%d/%s", r.N, r.Per)
	}
	return fmt.Sprintf("%d/%s", r.N, unit)
}

// Set parses a flag value (pflag.Value).
func (r *Rate) Set(s string) error {
	v, err := ParseRate(s)
	if err == nil {
		*r = v
	}
	return err
}

// Type names the flag's type in --help.
func (r *Rate) Type() string { return "rate" }

// RateLimiter limits requests per client with a token bucket each
// (golang.org/x/time/rate). Buckets of clients that have been quiet long
// enough to be full again are dropped.
type RateLimiter struct {
	rate  Rate
	mu    sync.Mutex
	byKey map[string]*rate.Limiter
	swept time.Time
}

// NewRateLimiter limits each client to r; nil when r is no limit.
func NewRateLimiter(r Rate) *RateLimiter {
	if r.N == 0 {
		return nil
	}
	return &RateLimiter{rate: r, byKey: map[string]*rate.Limiter{}}
}

// Allow takes one request of client's from its bucket; when the bucket is
// empty it returns false and how long until one request is allowed. A nil
// RateLimiter allows everything.
func (l *RateLimiter) Allow(client string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	lim := l.byKey[client]
	if lim == nil {
		lim = rate.NewLimiter(rate.Every(l.rate.Per/time.Duration(l.rate.N)), l.rate.N)
		l.byKey[client] = lim
	}
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops full buckets once per period.
func (l *RateLimiter) sweep(now time.Time) {
	if now.Sub(l.swept) < l.rate.Per {
		return
	}
	l.swept = now
	for k, lim := range l.byKey {
		if lim.TokensAt(now) >= float64(l.rate.N) {
			delete(l.byKey, k)
		}
	}
}

// clients is how many clients have a bucket (for tests).
func (l *RateLimiter) clients() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byKey)
}

// ConnectionLimiter bounds the connections one client holds at once.
type ConnectionLimiter struct {
	most  int
	mu    sync.Mutex
	count map[string]int
}

// NewConnectionLimiter allows most connections per client; nil (no
// limit) when most is 0.
func NewConnectionLimiter(most int) *ConnectionLimiter {
	if most <= 0 {
		return nil
	}
	return &ConnectionLimiter{most: most, count: map[string]int{}}
}

// Acquire counts one more connection of client's; ok is false when it
// holds the most already. release must be called once the connection is
// over. A nil ConnectionLimiter allows everything.
func (l *ConnectionLimiter) Acquire(client string) (release func(), ok bool) {
	if l == nil {
		return func() {}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count[client] >= l.most {
		return nil, false
	}
	l.count[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.count[client]--; l.count[client] <= 0 {
				delete(l.count, client)
			}
		})
	}, true
}

// retryAfter is a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
