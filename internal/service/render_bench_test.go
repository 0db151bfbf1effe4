package service

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asybench"
)

// renderClient is a keep-alive HTTP client for conc concurrent requests.
func renderClient(conc int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}}
}

// fetch GETs url, reads the body and checks it is want.
func fetch(b *testing.B, c *http.Client, url string, want []byte) time.Duration {
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
		b.Fatalf("GET %s: %d, %d bytes (%v)", url, resp.StatusCode, len(body), err)
	}
	return took
}

// load sends n GETs of url from conc clients at once and returns each
// request's latency and the requests per second.
func load(b *testing.B, c *http.Client, url string, want []byte, n, conc int) ([]time.Duration, float64) {
	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			var mine []time.Duration
			for i := w; i < n; i += conc {
				mine = append(mine, fetch(b, c, url, want))
			}
			mu.Lock()
			took = append(took, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return took, float64(n) / time.Since(start).Seconds()
}

// BenchmarkRenderCachedVsFileServer serves a cached figure through GET
// /api/render/{id}.svg and the same bytes through Go's http.FileServer,
// in the same run, alternating: latency of one client at a time (p50),
// and requests per second with 8 clients at once. Goals: p50 ≤ 1 ms and
// at least half the FileServer's requests per second.
//
//	go test -run '^$' -bench RenderCachedVsFileServer -benchtime 3x ./internal/service/
func BenchmarkRenderCachedVsFileServer(b *testing.B) {
	ts := startService(b, 1, nil)
	first := ts.postBench(b, asybench.Figure)
	image, loc := first.body, ts.srv.URL+first.header.Get("Content-Location")
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "figure.svg"), image, 0o644); err != nil {
		b.Fatal(err)
	}
	fs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	b.Cleanup(fs.Close)
	const conc, seq, par = 8, 500, 4000
	c := renderClient(conc)
	var lat = map[string][]time.Duration{}
	var rps = map[string][]float64{}
	targets := map[string]string{"render": loc, "fileserver": fs.URL + "/figure.svg"}
	for b.Loop() {
		for _, name := range []string{"render", "fileserver"} {
			url := targets[name]
			for range seq {
				lat[name] = append(lat[name], fetch(b, c, url, image))
			}
			_, r := load(b, c, url, image, par, conc)
			rps[name] = append(rps[name], r)
		}
	}
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(asybench.MS(asybench.Median(lat["render"])), "render-p50-ms")
	b.ReportMetric(asybench.MS(asybench.Median(lat["fileserver"])), "fileserver-p50-ms")
	b.ReportMetric(med(rps["render"]), "render-req/s")
	b.ReportMetric(med(rps["fileserver"]), "fileserver-req/s")
	b.ReportMetric(med(rps["render"])/med(rps["fileserver"]), "req/s-ratio")
	b.Logf("%d-byte svg: render p10/p50/p90 %s, %.0f req/s; FileServer %s, %.0f req/s; ratio %.2f (goals: p50 ≤ 1 ms, ratio ≥ 0.5)",
		len(image), asybench.Spread(lat["render"]), med(rps["render"]), asybench.Spread(lat["fileserver"]),
		med(rps["fileserver"]), med(rps["render"])/med(rps["fileserver"]))
}

func (ts *testService) postBench(b *testing.B, figure string) answer {
	resp, err := http.Post(ts.srv.URL+"/api/render?format=svg", "text/plain", bytes.NewReader([]byte(figure)))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("POST /api/render: %d %s (%v)", resp.StatusCode, body, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

// BenchmarkRenderVsAsy runs the same figure, uncached (the result cache
// off), through POST /api/render and through /asy, interleaved and
// alternating which goes first. Goal: the render API adds at most 10 ms
// at the median.
//
//	go test -run '^$' -bench RenderVsAsy -benchtime 40x ./internal/service/
func BenchmarkRenderVsAsy(b *testing.B) {
	ts := startService(b, 1, func(c *Config) { c.CacheBytes = 0 })
	render, ws := ts.renderAndAsy(b)
	over := asybench.Median(render) - asybench.Median(ws)
	b.ReportMetric(asybench.MS(asybench.Median(render)), "render-ms")
	b.ReportMetric(asybench.MS(asybench.Median(ws)), "asy-ws-ms")
	b.ReportMetric(asybench.MS(over), "added-ms")
	b.ReportMetric(asybench.MS(asybench.Median(asybench.Paired(render, ws))), "paired-added-ms")
	b.Logf("n=%d render p10/p50/p90 %s, /asy %s; added %.1f ms (goal ≤ 10 ms)",
		len(ws), asybench.Spread(render), asybench.Spread(ws), asybench.MS(over))
}

// BenchmarkRenderCachedPostVsAsy times a task answered from the result
// cache through POST /api/render and through /asy (dial to close),
// interleaved: what the render API's own layer costs (parsing, keeping
// the source, headers) with asy's run time, and its noise, left out.
//
//	go test -run '^$' -bench RenderCachedPostVsAsy -benchtime 300x ./internal/service/
func BenchmarkRenderCachedPostVsAsy(b *testing.B) {
	ts := startService(b, 1, nil)
	ts.postBench(b, asybench.Figure) // fills the cache
	render, ws := ts.renderAndAsy(b)
	b.ReportMetric(asybench.MS(asybench.Median(render)), "render-ms")
	b.ReportMetric(asybench.MS(asybench.Median(ws)), "asy-ws-ms")
	b.ReportMetric(asybench.MS(asybench.Median(asybench.Paired(render, ws))), "paired-added-ms")
	b.Logf("n=%d cached: render p50 %.2f ms, /asy p50 %.2f ms", len(ws), asybench.MS(asybench.Median(render)), asybench.MS(asybench.Median(ws)))
}

// renderAndAsy times the typical figure through POST /api/render and
// through /asy (dial to close) once per benchmark iteration each, taking
// turns at going first.
func (ts *testService) renderAndAsy(b *testing.B) (render, ws []time.Duration) {
	viaRender := func() {
		start := time.Now()
		ts.postBench(b, asybench.Figure)
		render = append(render, time.Since(start))
	}
	viaAsy := func() { ws = append(ws, timeCompile(b, ts, asybench.Figure)) }
	asybench.Alternate(b, viaRender, viaAsy)
	return render, ws
}
