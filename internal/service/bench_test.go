package service

import (
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asybench"
)

// timeCompile times one task through /asy, from dialing to the close.
func timeCompile(b *testing.B, ts *testService, source string) time.Duration {
	start := time.Now()
	c := dial(b, ts.srv)
	c.compile(source, nil)
	all := c.rest()
	took := time.Since(start)
	if done := final(b, all); done.body["success"] != true {
		b.Fatalf("compile: %v", done.body)
	}
	return took
}

// BenchmarkAsyVsBare runs the same figure through /asy (cache off, one
// local backend) and through bare asy, interleaved and alternating which
// goes first. Goal: the service's overhead at the median is at
// most 10 ms.
//
//	go test -run '^$' -bench AsyVsBare -benchtime 30x ./internal/service/
func BenchmarkAsyVsBare(b *testing.B) {
	ts := startService(b, 1, func(c *Config) { c.CacheBytes = 0 })
	var service, bare []time.Duration
	viaService := func() { service = append(service, timeCompile(b, ts, asybench.Figure)) }
	direct := func() {
		d, err := asybench.Bare(asybench.Figure, "svg")
		if err != nil {
			b.Fatal(err)
		}
		bare = append(bare, d)
	}
	asybench.Alternate(b, viaService, direct)
	over := asybench.Median(service) - asybench.Median(bare)
	b.ReportMetric(asybench.MS(asybench.Median(service)), "service-ms")
	b.ReportMetric(asybench.MS(asybench.Median(bare)), "asy-ms")
	b.ReportMetric(asybench.MS(over), "overhead-ms")
	b.ReportMetric(asybench.MS(asybench.Median(asybench.Paired(service, bare))), "paired-overhead-ms")
	b.Logf("n=%d service p10/p50/p90 %s, asy %s; overhead %.1f ms (goal ≤ 10 ms)",
		len(bare), asybench.Spread(service), asybench.Spread(bare), asybench.MS(over))
}

// BenchmarkCachedResult times a task answered from the result cache, end
// to end: dial, add, run, every message, close. Goal: at most
// 2 ms at the median.
//
//	go test -run '^$' -bench CachedResult -benchtime 200x ./internal/service/
func BenchmarkCachedResult(b *testing.B) {
	ts := startService(b, 1, nil)
	timeCompile(b, ts, asybench.Figure) // fills the cache
	var took []time.Duration
	for b.Loop() {
		took = append(took, timeCompile(b, ts, asybench.Figure))
	}
	b.ReportMetric(asybench.MS(asybench.Median(took)), "median-ms")
	b.Logf("n=%d cached p10/p50/p90 %s (goal ≤ 2 ms)", len(took), asybench.Spread(took))
}
