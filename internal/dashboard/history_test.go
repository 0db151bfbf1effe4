package dashboard

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/testclock"
)

// t0 begins an interval: a multiple of SampleEvery since the epoch.
var t0 = time.Unix(1_800_000_000, 0)

func TestBucketOf(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{999 * time.Microsecond, 0},
		{time.Millisecond, 1},
		{1189 * time.Microsecond, 1}, // below 2^(1/4) ms
		{1190 * time.Microsecond, 2},
		{2 * time.Millisecond, 5},
		{time.Second, 40}, // log2(1000) = 9.97 → floor(39.9) + 1
		{time.Hour, HistogramBuckets - 1},
	} {
		if got := BucketOf(c.d); got != c.want {
			t.Errorf("BucketOf(%v) = %d, want %d", c.d, got, c.want)
		}
		if lo, hi := bucketBounds(BucketOf(c.d)); c.d < time.Hour && (float64(c.d)/1e6 < lo || float64(c.d)/1e6 >= hi) {
			t.Errorf("%v outside its bucket [%g, %g) ms", c.d, lo, hi)
		}
	}
}

// Quantiles from the histogram fall within a bucket's width (19 %) of the
// exact quantile of the durations counted.
func TestQuantiles(t *testing.T) {
	for _, c := range []struct {
		name string
		ms   []int // durations counted, ms
		want Quantiles
	}{
		{"one value", []int{200}, Quantiles{200, 200, 200}},
		{"uniform 1..100", seq(1, 100), Quantiles{50, 90, 99}},
		{"a slow tail", append(repeat(100, 95), repeat(5000, 5)...), Quantiles{100, 100, 5000}},
		{"sub-millisecond", []int{0, 0, 0}, Quantiles{0.5, 0.9, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h Histogram
			for _, ms := range c.ms {
				h.Add(time.Duration(ms) * time.Millisecond)
			}
			got := h.quantiles()
			if got == nil {
				t.Fatal("no quantiles")
			}
			for i := range got {
				if math.Abs(got[i]-c.want[i]) > 0.19*c.want[i]+0.01 {
					t.Errorf("quantile %d = %g ms, want %g ± 19%%", i, got[i], c.want[i])
				}
			}
		})
	}
	var empty Histogram
	if empty.quantiles() != nil {
		t.Error("an empty histogram has quantiles")
	}
}

func seq(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// Counts survive the trip through Redis hash fields, and counts from two
// queue servers add up; fields that are not counts are refused.
func TestCountsFields(t *testing.T) {
	a, b := NewTally(SampleEvery, func() time.Time { return t0 }), NewTally(SampleEvery, func() time.Time { return t0 })
	a.Ended(true, 120*time.Millisecond)
	a.CacheLookup(false)
	a.Denied("queue_full")
	b.Ended(false, 3*time.Second)
	b.CacheLookup(true)
	b.Waited(2 * time.Second)
	b.Denied("weird reason")
	i := IntervalOf(t0, SampleEvery)
	sum := map[string]int64{}
	for _, tl := range []*Tally{a, b} {
		for f, n := range tl.Take(i).Fields() {
			sum[f] += n
		}
	}
	strs := map[string]string{}
	for f, n := range sum {
		strs[f] = itoa(n)
	}
	c, err := CountsOfFields(strs)
	if err != nil {
		t.Fatal(err)
	}
	if c.Done != 2 || c.Failed != 1 || c.CacheHits != 1 || c.CacheMisses != 1 ||
		c.Denials["queue_full"] != 1 || c.Denials["other"] != 1 || c.Compile.Count() != 2 || c.Wait.Count() != 1 {
		t.Fatalf("summed counts: %+v", c)
	}
	for _, bad := range []map[string]string{
		{"done": "x"}, {"done": "-1"}, {"compile.82": "1"}, {"compile.a": "1"}, {"denied.secret": "1"}, {"whatever": "1"},
	} {
		if _, err := CountsOfFields(bad); err == nil {
			t.Errorf("CountsOfFields(%v) accepted", bad)
		}
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// The sampler keeps each interval's peak gauges and closes an interval
// once its settle time has passed, in order, and never twice.
func TestSampler(t *testing.T) {
	g := func(waiting, running int) Gauges {
		return Gauges{Waiting: map[string]int{"fast": waiting}, Running: map[string]int{"fast": running}}
	}
	type look struct {
		at      time.Duration // after t0
		g       Gauges
		wantDue []int64 // intervals after t0's
	}
	for _, c := range []struct {
		name   string
		settle time.Duration
		looks  []look
	}{
		{"peak of an interval, due at its end", 0, []look{
			{0, g(1, 0), nil}, {4 * time.Second, g(3, 2), nil}, {9 * time.Second, g(0, 1), nil},
			{10 * time.Second, g(0, 0), []int64{0}},
		}},
		{"settle delays the close", 3 * time.Second, []look{
			{time.Second, g(1, 1), nil}, {12 * time.Second, g(0, 0), nil}, {13 * time.Second, g(0, 0), []int64{0}},
		}},
		{"a gap in the looks is a gap in the samples", 0, []look{
			{0, g(1, 1), nil}, {35 * time.Second, g(2, 2), []int64{0}}, {40 * time.Second, g(0, 0), []int64{3}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSampler(SampleEvery, c.settle)
			first := IntervalOf(t0, SampleEvery)
			for _, l := range c.looks {
				due := s.Look(t0.Add(l.at), l.g)
				if len(due) != len(l.wantDue) {
					t.Fatalf("at +%v: due %v, want %v", l.at, due, l.wantDue)
				}
				for k, i := range due {
					if i-first != l.wantDue[k] {
						t.Fatalf("at +%v: due %v, want %v", l.at, due, l.wantDue)
					}
					smp := s.Close(i, Counts{})
					if i == first && c.name == "peak of an interval, due at its end" && (smp.Waiting["fast"] != 3 || smp.Running["fast"] != 2) {
						t.Fatalf("peaks %v %v, want waiting 3 running 2", smp.Waiting, smp.Running)
					}
					if smp.T != i*SampleEvery.Milliseconds() {
						t.Fatalf("sample time %d for interval %d", smp.T, i)
					}
				}
			}
		})
	}
	s := NewSampler(SampleEvery, 0)
	s.Resume(t0.Add(10 * time.Second).UnixMilli())
	if due := s.Look(t0.Add(15*time.Second), g(1, 1)); len(due) != 0 {
		t.Fatalf("resumed sampler: due %v", due)
	}
	if due := s.Look(t0.Add(20*time.Second), g(1, 1)); len(due) != 0 {
		t.Fatalf("resumed sampler sampled the interval its predecessor wrote: %v", due)
	}
}

// The recorder, driven by a test clock, makes a sample per interval with
// the tally's counts, and keeps the last hour only.
func TestRecorderKeepsTheLastHour(t *testing.T) {
	clock := testclock.New(t0)
	r := NewRecorder(clock.Now)
	for range HistorySamples + 5 {
		r.Look(clock.Now(), Gauges{Waiting: map[string]int{"default": 2}, Running: map[string]int{"slow": 1}})
		r.Tally.Ended(true, 300*time.Millisecond)
		r.Tally.Waited(time.Second)
		r.Tally.CacheLookup(false)
		clock.Advance(SampleEvery)
	}
	r.Look(clock.Now(), Gauges{})
	h := r.History()
	if len(h.Samples) != HistorySamples {
		t.Fatalf("%d samples, want %d", len(h.Samples), HistorySamples)
	}
	newest := h.Samples[len(h.Samples)-1]
	if want := clock.Now().Add(-SampleEvery).UnixMilli(); newest.T != want {
		t.Fatalf("newest sample at %d, want %d", newest.T, want)
	}
	if newest.Done != 1 || newest.CacheMisses != 1 || newest.Waiting["default"] != 2 || newest.Running["slow"] != 1 ||
		newest.CompileMS == nil || math.Abs(newest.CompileMS[0]-300) > 60 || newest.WaitMS == nil {
		t.Fatalf("newest sample %+v", newest)
	}
	for k := 1; k < len(h.Samples); k++ {
		if h.Samples[k].T-h.Samples[k-1].T != SampleEvery.Milliseconds() {
			t.Fatalf("samples %d and %d are not one interval apart", k-1, k)
		}
	}
	if got := h.Since(h.Samples[357].T).Samples; len(got) != 2 || got[0].T != h.Samples[358].T {
		t.Fatalf("Since: %d samples", len(got))
	}
	if got := h.Since(newest.T).Samples; len(got) != 0 {
		t.Fatalf("Since the newest: %d samples", len(got))
	}
}

// A sample says nothing of a task beyond counts and durations.
func TestSampleCarriesNoTaskContent(t *testing.T) {
	c := Counts{Done: 1, Denials: map[string]int64{"request": 1}}
	c.Compile.Add(time.Second)
	b := string(NewSample(1, SampleEvery, Gauges{Waiting: map[string]int{"fast": 1}, Running: map[string]int{"fast": 1}}, c).Encode())
	var m map[string]any
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		t.Fatal(err)
	}
	allowed := "t waiting running done failed denied denials cacheHits cacheMisses compileMs waitMs"
	for k := range m {
		if !strings.Contains(" "+allowed+" ", " "+k+" ") {
			t.Errorf("sample field %q", k)
		}
	}
}

// An interval with counts but no look (the load was not looked at in
// time) still gets its sample.
func TestRecorderSamplesCountsWithoutALook(t *testing.T) {
	clock := testclock.New(t0)
	r := NewRecorder(clock.Now)
	r.Tally.Denied("idle")
	clock.Advance(SampleEvery)
	r.Look(clock.Now(), Gauges{})
	h := r.History()
	if len(h.Samples) != 1 || h.Samples[0].T != t0.UnixMilli() || h.Samples[0].Denials["idle"] != 1 {
		t.Fatalf("history %+v", h.Samples)
	}
}
