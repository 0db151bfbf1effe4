package dashboard

import (
	"math"
	"time"
)

// Durations (compile times, queue waits) are counted in a histogram of
// fixed buckets, not kept one by one: counts from several queue servers add
// up bucket by bucket (multi-node mode sums them in Redis), and an
// interval's quantiles come from the sum. Bucket 0 holds durations under
// 1 ms; bucket k ≥ 1 holds [2^((k-1)/4), 2^(k/4)) ms, so neighbouring
// bounds differ by 19 %, and the last bucket holds everything from
// 2^((HistogramBuckets-2)/4) ms (about 17 minutes) up.
const (
	HistogramBuckets = 82
	bucketsPerDouble = 4
)

// Histogram counts durations by bucket.
type Histogram [HistogramBuckets]int64

// BucketOf is the bucket a duration falls in.
func BucketOf(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 1 {
		return 0
	}
	k := int(math.Floor(math.Log2(ms)*bucketsPerDouble)) + 1
	return min(k, HistogramBuckets-1)
}

// bucketBounds is bucket k's range in milliseconds.
func bucketBounds(k int) (lo, hi float64) {
	if k == 0 {
		return 0, 1
	}
	return math.Exp2(float64(k-1) / bucketsPerDouble), math.Exp2(float64(k) / bucketsPerDouble)
}

// Add counts one duration.
func (h *Histogram) Add(d time.Duration) { h[BucketOf(d)]++ }

// Merge adds o's counts to h.
func (h *Histogram) Merge(o Histogram) {
	for k, n := range o {
		h[k] += n
	}
}

// Count is how many durations h holds.
func (h *Histogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile estimates the q-quantile (0 < q ≤ 1) in milliseconds, by linear
// interpolation inside the bucket where it falls: the estimate lies in the
// same bucket as the true value, so it is off by less than the bucket's
// width (19 % of the value above 1 ms). It is 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) float64 {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var seen float64
	for k, c := range h {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			lo, hi := bucketBounds(k)
			return lo + (hi-lo)*(rank-seen)/float64(c)
		}
		seen += float64(c)
	}
	_, hi := bucketBounds(HistogramBuckets - 1)
	return hi
}

// Quantiles are an interval's p50, p90 and p99 in milliseconds, rounded
// to 0.1 ms.
type Quantiles [3]float64

// quantiles returns h's p50, p90 and p99, or nil when h is empty.
func (h *Histogram) quantiles() *Quantiles {
	if h.Count() == 0 {
		return nil
	}
	var q Quantiles
	for i, p := range []float64{0.5, 0.9, 0.99} {
		q[i] = math.Round(h.Quantile(p)*10) / 10
	}
	return &q
}
