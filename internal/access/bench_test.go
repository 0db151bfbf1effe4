package access

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkRenderGuard is what the policy adds to one render request
// behind a trusted proxy: the client's address, the origin check, CORS
// headers and the rate limit (docs/benchmarks.md).
func BenchmarkRenderGuard(b *testing.B) {
	proxies, err := NewProxies([]string{"127.0.0.1"}, XForwardedFor)
	if err != nil {
		b.Fatal(err)
	}
	origins, err := NewOrigins([]string{"https://forum.example.org"})
	if err != nil {
		b.Fatal(err)
	}
	p := New(Config{Proxies: proxies, Origins: origins, RenderRate: Rate{N: 1 << 20, Per: time.Second}})
	h := p.Render(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest(http.MethodGet, "http://usher.example/api/render/abc.svg", nil)
	r.RemoteAddr = "127.0.0.1:4000"
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	r.Header.Set("Referer", "https://forum.example.org/t/1")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		clear(w.Header())
		h.ServeHTTP(w, r)
	}
}
