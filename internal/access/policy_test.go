package access

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// work is a plain handler that counts the requests that reached it.
type work struct{ n atomic.Int32 }

func (w *work) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	w.n.Add(1)
	rw.WriteHeader(http.StatusOK)
}

func do(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func errorText(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct{ Error string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == "" {
		t.Fatalf("body %q is not JSON {error}", rec.Body)
	}
	return body.Error
}

func mustOrigins(t *testing.T, list ...string) Origins {
	t.Helper()
	o, err := NewOrigins(list)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOriginsAllow(t *testing.T) {
	listed := mustOrigins(t, "https://forum.example.org", "http://localhost:3000")
	star := mustOrigins(t, "*")
	for _, c := range []struct {
		o            Origins
		origin, host string
		want         bool
	}{
		{Origins{}, "http://usher.example", "usher.example", true},
		{Origins{}, "https://usher.example", "usher.example", true},
		{Origins{}, "https://USHER.example:443", "usher.example", true},
		{Origins{}, "http://usher.example:8080", "usher.example:8080", true},
		{Origins{}, "http://usher.example:8081", "usher.example:8080", false},
		{Origins{}, "https://evil.example", "usher.example", false},
		{Origins{}, "null", "usher.example", false},
		{listed, "https://forum.example.org", "usher.example", true},
		{listed, "https://forum.example.org:443", "usher.example", true},
		{listed, "http://forum.example.org", "usher.example", false},
		{listed, "https://sub.forum.example.org", "usher.example", false},
		{listed, "http://localhost:3000", "usher.example", true},
		{star, "https://anyone.example", "usher.example", true},
		{star, "null", "usher.example", true},
	} {
		if got := c.o.Allows(c.origin, c.host); got != c.want {
			t.Errorf("Allows(%q, host %q) = %v; want %v", c.origin, c.host, got, c.want)
		}
	}
	for _, bad := range []string{"forum.example.org", "https://forum.example.org/path", "ftp://x", "https://"} {
		if _, err := NewOrigins([]string{bad}); err == nil {
			t.Errorf("NewOrigins(%q) accepted it", bad)
		}
	}
}

// A WebSocket from an origin that is not allowed is refused with 403
// before the handler runs; no Origin (a non-browser client) and the
// server's own origin go through.
func TestWebSocketRefusesOtherOriginsBeforeWork(t *testing.T) {
	p := New(Config{Origins: mustOrigins(t, "https://forum.example.org")})
	var w work
	h := p.WebSocket(&w)
	for _, c := range []struct {
		origin string
		want   int
	}{{"https://evil.example", 403}, {"", 200}, {"http://usher.example", 200}, {"https://forum.example.org", 200}, {"null", 403}} {
		r := request("203.0.113.1:1", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"})
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		before := w.n.Load()
		rec := do(h, r)
		if rec.Code != c.want {
			t.Fatalf("origin %q: %d; want %d", c.origin, rec.Code, c.want)
		}
		if c.want == 403 {
			if w.n.Load() != before {
				t.Fatalf("origin %q reached the handler", c.origin)
			}
			if txt := errorText(t, rec); !strings.Contains(txt, "--allowed-origins") {
				t.Fatalf("403 text %q does not say how to allow it", txt)
			}
		}
	}
	if n := p.refusals(t, refusedOrigin); n != 2 {
		t.Fatalf("usher_access_refused_total{reason=origin} = %v; want 2", n)
	}
}

// A client holding its most connections gets 429 with Retry-After before
// the upgrade; another client does not; a finished connection frees its
// place.
func TestWebSocketConnectionsPerClient(t *testing.T) {
	p := New(Config{ConnectionsPerClient: 2})
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	h := p.WebSocket(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- do(h, request("198.51.100.1:1", nil)).Code }()
		<-entered
	}
	rec := do(h, request("198.51.100.1:2", nil))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("third connection: %d, Retry-After %q; want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	errorText(t, rec)
	if n := p.refusals(t, refusedConnections); n != 1 {
		t.Fatalf("usher_access_refused_total{reason=connections} = %v; want 1", n)
	}
	go func() { done <- do(h, request("198.51.100.2:1", nil)).Code }()
	<-entered // another client is not held back
	close(release)
	for range 3 {
		<-done
	}
	go func() { done <- do(h, request("198.51.100.1:3", nil)).Code }()
	<-entered
	if c := <-done; c != 200 {
		t.Fatalf("after the connections ended: %d; want 200", c)
	}
}

// CORS: preflights of allowed origins get 204 with the allowed methods and
// headers, without running the handler; other origins get 403, also for
// <img> loads named only by Referer; every answer varies by Origin.
func TestCORS(t *testing.T) {
	p := New(Config{Origins: mustOrigins(t, "https://forum.example.org")})
	var w work
	h := p.CORS(&w)
	pre := httptest.NewRequest(http.MethodOptions, "http://usher.example/api/render", nil)
	pre.Header.Set("Origin", "https://forum.example.org")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "content-type")
	rec := do(h, pre)
	if rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != "https://forum.example.org" ||
		!strings.Contains(rec.Header().Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(rec.Header().Get("Access-Control-Allow-Headers"), "Content-Type") || w.n.Load() != 0 {
		t.Fatalf("preflight: %d %v (handler ran %d times)", rec.Code, rec.Header(), w.n.Load())
	}
	pre.Header.Set("Origin", "https://evil.example")
	if rec := do(h, pre); rec.Code != http.StatusForbidden || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight of another origin: %d %v", rec.Code, rec.Header())
	}
	for _, c := range []struct {
		name, header, value string
		want                int
		allowOrigin         string
	}{
		{"allowed POST", "Origin", "https://forum.example.org", 200, "https://forum.example.org"},
		{"other origin's POST", "Origin", "https://evil.example", 403, ""},
		{"img from an allowed page", "Referer", "https://forum.example.org/t/123", 200, ""},
		{"img from another page", "Referer", "https://evil.example/page", 403, ""},
		{"no Origin nor Referer", "", "", 200, ""},
		{"own page", "Referer", "http://usher.example/s/abc", 200, ""},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://usher.example/api/render", strings.NewReader("draw(unitcircle);"))
		if c.header != "" {
			r.Header.Set(c.header, c.value)
		}
		before := w.n.Load()
		rec := do(h, r)
		if rec.Code != c.want || rec.Header().Get("Access-Control-Allow-Origin") != c.allowOrigin ||
			!strings.Contains(strings.Join(rec.Header().Values("Vary"), ","), "Origin") {
			t.Errorf("%s: %d %v; want %d, Allow-Origin %q, Vary: Origin", c.name, rec.Code, rec.Header(), c.want, c.allowOrigin)
		}
		if c.want == 403 && w.n.Load() != before {
			t.Errorf("%s reached the handler", c.name)
		}
	}
	star := New(Config{Origins: mustOrigins(t, "*")}).CORS(&w)
	r := httptest.NewRequest(http.MethodGet, "http://usher.example/embed.js", nil)
	r.Header.Set("Origin", "https://anyone.example")
	if rec := do(star, r); rec.Code != 200 || rec.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("with *: %d %v", rec.Code, rec.Header())
	}
}

// Rate limits: a client past its rate gets 429 with a Retry-After that
// is the wait, and JSON {error}; another client is not held back; once
// the wait is over the client may go on. Only POSTs count for shares.
func TestRateLimits(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p := New(Config{ShareRate: Rate{N: 2, Per: time.Minute}, RenderRate: Rate{N: 1, Per: time.Second}})
	p.cfg.now = func() time.Time { return now }
	var w work
	shares := p.Shares(&w)
	send := func(h http.Handler, method, peer string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://usher.example/api/shares", nil)
		r.RemoteAddr = peer
		return do(h, r)
	}
	for i := range 2 {
		if c := send(shares, http.MethodPost, "198.51.100.1:1").Code; c != 200 {
			t.Fatalf("share %d: %d", i+1, c)
		}
	}
	rec := send(shares, http.MethodPost, "198.51.100.1:1")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "30" {
		t.Fatalf("third share in a minute: %d, Retry-After %q; want 429, 30", rec.Code, rec.Header().Get("Retry-After"))
	}
	errorText(t, rec)
	if c := send(shares, http.MethodGet, "198.51.100.1:1").Code; c != 200 {
		t.Fatalf("reading a share past the creation rate: %d", c)
	}
	if c := send(shares, http.MethodPost, "198.51.100.2:1").Code; c != 200 {
		t.Fatalf("another client: %d", c)
	}
	now = now.Add(30 * time.Second)
	if c := send(shares, http.MethodPost, "198.51.100.1:1").Code; c != 200 {
		t.Fatalf("after Retry-After: %d", c)
	}
	render := p.Render(&w)
	if c := send(render, http.MethodGet, "198.51.100.1:1").Code; c != 200 {
		t.Fatalf("render: %d", c)
	}
	if rec := send(render, http.MethodGet, "198.51.100.1:1"); rec.Code != 429 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("second render in a second: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
}

// The rate limiter forgets clients whose bucket is full again, so that a
// stream of passers-by does not grow it without bound.
func TestRateLimiterForgetsQuietClients(t *testing.T) {
	l := NewRateLimiter(Rate{N: 2, Per: time.Minute})
	now := time.Unix(1_700_000_000, 0)
	for i := range 100 {
		l.Allow(fmt.Sprintf("198.51.100.%d", i), now)
	}
	l.Allow("203.0.113.1", now.Add(30*time.Second)) // sweeps nothing yet: a minute has not passed
	if n := l.clients(); n != 101 {
		t.Fatalf("%d clients kept; want 101", n)
	}
	l.Allow("203.0.113.1", now.Add(61*time.Second))
	if n := l.clients(); n != 1 {
		t.Fatalf("after a quiet minute %d clients kept; want only the one still active", n)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]Rate{"10/m": {10, time.Minute}, "5/s": {5, time.Second}, "100/hour": {100, time.Hour}, "0": {}, "0/m": {}} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"10", "10/d", "-1/m", "x/m", "10/"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted it", bad)
		}
	}
}

// refusals reads usher_access_refused_total for reason.
func (p *Policy) refusals(t *testing.T, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := p.refused.WithLabelValues(reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Whatever a browser (or a forger) puts in Origin or Referer: only the
// server's own host passes the default policy, and "*" passes all.
func FuzzOriginCheck(f *testing.F) {
	for _, s := range []string{"http://usher.example", "https://usher.example:443", "http://usher.example.evil.org",
		"http://evil.org#usher.example", "http://usher.example@evil.org", "null", "http://[::1]:80", "https://usher.example/x?y"} {
		f.Add(s, "usher.example", false)
		f.Add(s, "usher.example", true)
	}
	star := Origins{any: true}
	f.Fuzz(func(t *testing.T, value, host string, referer bool) {
		r := httptest.NewRequest(http.MethodGet, "http://usher.example/api/render", nil)
		r.Host = host
		if referer {
			r.Header.Set("Referer", value)
		} else {
			r.Header.Set("Origin", value)
		}
		if err := star.Check(r); err != nil {
			t.Fatalf("* refused %q: %v", value, err)
		}
		if (Origins{}).Check(r) != nil {
			return
		}
		origin, told := RequestOrigin(r)
		if !told {
			return // nothing to check
		}
		norm, ok := normalizeOrigin(origin)
		if !ok {
			t.Fatalf("allowed %q, which is not an origin", origin)
		}
		u, _ := url.Parse(norm)
		if !strings.EqualFold(u.Hostname(), hostOnly(host)) {
			t.Fatalf("allowed origin %q for host %q", origin, host)
		}
	})
}

// hostOnly is a Host header without its port.
func hostOnly(h string) string {
	if u, err := url.Parse("http://" + h); err == nil {
		return u.Hostname()
	}
	return h
}
