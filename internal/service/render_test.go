package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/access"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/renderapi"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/testwait"
)

// These tests drive the render API (internal/renderapi) of a real service
// with real sandboxed asy.

type answer struct {
	status int
	header http.Header
	body   []byte
}

// errorText is the "error" of a JSON error answer.
func (a answer) errorText(t *testing.T) (text, output string) {
	t.Helper()
	var b struct {
		Error  string  `json:"error"`
		Output *string `json:"output"`
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error answer %d has Content-Type %q: %s", a.status, ct, a.body)
	}
	if err := json.Unmarshal(a.body, &b); err != nil || b.Error == "" {
		t.Fatalf("error answer %d: %s (%v)", a.status, a.body, err)
	}
	if b.Output != nil {
		output = *b.Output
	}
	return b.Error, output
}

// do sends req and reads the answer. It may run on goroutines other than
// the test's: a failure is an Error and a status of -1.
func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return answer{status: -1}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
		return answer{status: -1}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

func (ts *testService) postRender(t *testing.T, query, contentType string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.srv.URL+"/api/render"+query, bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return answer{status: -1}
	}
	req.Header.Set("Content-Type", contentType)
	return do(t, req)
}

func (ts *testService) get(t *testing.T, path string, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	maps := req.Header
	for k, v := range header {
		maps[k] = v
	}
	return do(t, req)
}

// compiles is how many runs of asy the service has finished.
func (ts *testService) compiles(t *testing.T) uint64 {
	t.Helper()
	families, err := ts.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() == "usher_asy_compile_seconds" {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// answers is usher_render_answers_total for route and code.
func (ts *testService) answers(t *testing.T, route, code string) float64 {
	t.Helper()
	families, err := ts.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "usher_render_answers_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Each format comes back with its type, the headers that keep it from
// running in usher's origin, and a permanent URL that serves the same
// bytes, revalidated with 304.
func TestRenderEachFormat(t *testing.T) {
	tests := []struct{ format, figure, contentType, disposition, csp string }{
		{"svg", quickFigure, "image/svg+xml", "inline", "sandbox; default-src 'none'"},
		{"pdf", quickFigure, "application/pdf", "inline", "sandbox; default-src 'none'"},
		{"png", quickFigure, "image/png", "inline", "sandbox; default-src 'none'"},
		{"eps", sphere3D, "application/postscript", "attachment", "sandbox; default-src 'none'"},
		{"html", sphere3D, "text/html; charset=utf-8", "inline", "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'"},
	}
	ts := startService(t, 2, nil)
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			a := ts.postRender(t, "?format="+tt.format, "text/plain", []byte(tt.figure))
			if a.status != http.StatusOK || !sandbox.HasMagic(tt.format, a.body) {
				t.Fatalf("POST: %d %q", a.status, a.body[:min(80, len(a.body))])
			}
			checkResultHeaders(t, a, tt.contentType, tt.disposition, tt.csp)
			loc := a.header.Get("Content-Location")
			if !strings.HasPrefix(loc, "/api/render/") || !strings.HasSuffix(loc, "."+tt.format) {
				t.Fatalf("Content-Location %q", loc)
			}
			again := ts.get(t, loc, nil)
			if again.status != http.StatusOK || !bytes.Equal(again.body, a.body) {
				t.Fatalf("GET %s: %d, same bytes %t", loc, again.status, bytes.Equal(again.body, a.body))
			}
			checkResultHeaders(t, again, tt.contentType, tt.disposition, tt.csp)
			if again.header.Get("ETag") != a.header.Get("ETag") || !strings.HasPrefix(a.header.Get("ETag"), `"`) {
				t.Fatalf("ETag %q then %q: want the same strong tag", a.header.Get("ETag"), again.header.Get("ETag"))
			}
			cond := ts.get(t, loc, http.Header{"If-None-Match": {a.header.Get("ETag")}})
			if cond.status != http.StatusNotModified || len(cond.body) != 0 {
				t.Fatalf("If-None-Match: %d with %d bytes, want 304 and none", cond.status, len(cond.body))
			}
		})
	}
	if got := ts.answers(t, "id", "304"); got != float64(len(tests)) {
		t.Fatalf("usher_render_answers_total{route=id,code=304} = %v, want %d", got, len(tests))
	}
}

func checkResultHeaders(t *testing.T, a answer, contentType, disposition, csp string) {
	t.Helper()
	h := a.header
	want := map[string]string{
		"Content-Type":           contentType,
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "public, max-age=31536000, immutable",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, h.Get(k), v)
		}
	}
	if !strings.HasPrefix(h.Get("Content-Security-Policy"), csp) {
		t.Errorf("Content-Security-Policy %q does not start %q", h.Get("Content-Security-Policy"), csp)
	}
	if !strings.HasPrefix(h.Get("Content-Disposition"), disposition+";") {
		t.Errorf("Content-Disposition %q, want %s", h.Get("Content-Disposition"), disposition)
	}
}

// A figure that does not compile is a 422 carrying asy's message; a
// figure that runs out of time names the limit.
func TestRenderFailureCarriesAsyOutput(t *testing.T) {
	ts := startService(t, 1, nil)
	a := ts.postRender(t, "", "text/plain", []byte("draw((0,0)--(1,1)\n"))
	if a.status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	text, output := a.errorText(t)
	if !strings.Contains(output, "figure.asy: 2.1: unexpected end of input") {
		t.Fatalf("output %q lacks asy's syntax error", output)
	}
	if text == "" {
		t.Fatal("no error text")
	}
	fast := ts.queue.Timeouts()[0]
	slow := ts.get(t, fmt.Sprintf("/api/render?timeout=%d&src=%s", fast.Milliseconds(), url.QueryEscape(spinForever)), nil)
	if slow.status != http.StatusUnprocessableEntity {
		t.Fatalf("spinning figure: %d %s", slow.status, slow.body)
	}
	if text, _ := slow.errorText(t); !strings.Contains(strings.ToLower(text), "time") {
		t.Fatalf("spinning figure's error %q does not name the time limit", text)
	}
	ts.waitIdle(t)
}

// A full queue is a 503 with Retry-After, and the render never runs.
func TestRenderQueueFullIsRetryLater(t *testing.T) {
	ts := startService(t, 1, func(c *Config) { c.Caps = asyqueue.Caps{MaxQueued: 1, MaxQueuedPerClient: 1} })
	occupy(t, ts, 1, map[string]any{"timeout": 3000})
	waiting := dial(t, ts.srv)
	waiting.compile("draw((0,0)--(2,2));\n", nil)
	if _, q := waiting.until("queue"); q.body["passed"] == true {
		t.Fatal("the second task ran with the only backend busy")
	}
	before := ts.compiles(t)
	a := ts.postRender(t, "", "text/plain", []byte("draw((0,0)--(3,3));\n"))
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q: %s", a.status, a.header.Get("Retry-After"), a.body)
	}
	if text, _ := a.errorText(t); text != asyqueue.ErrQueueFull.Error() {
		t.Fatalf("error %q, want %q", text, asyqueue.ErrQueueFull)
	}
	ts.waitIdle(t)
	if after := ts.compiles(t); after != before+2 {
		t.Fatalf("%d runs finished after the denial, want the 2 WebSocket tasks only", after-before)
	}
}

// An id stays valid after the result cache lost its image: GET computes it
// again from the kept source.
func TestRenderEvictedResultIsComputedAgain(t *testing.T) {
	ts := startService(t, 1, nil)
	a := ts.postRender(t, "?format=svg", "text/plain", []byte("draw(unitcircle);\n"))
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if _, err := ts.db.Exec(`DELETE FROM result_cache`); err != nil {
		t.Fatal(err)
	}
	before := ts.compiles(t)
	again := ts.get(t, a.header.Get("Content-Location"), nil)
	if again.status != http.StatusOK || !bytes.Equal(again.body, a.body) || again.header.Get("ETag") != a.header.Get("ETag") {
		t.Fatalf("GET after eviction: %d, same bytes %t", again.status, bytes.Equal(again.body, a.body))
	}
	if ran := ts.compiles(t) - before; ran != 1 {
		t.Fatalf("%d runs for the evicted result, want 1", ran)
	}
	if gone := ts.get(t, "/api/render/"+strings.Repeat("ab", 32)+".svg", nil); gone.status != http.StatusNotFound {
		t.Fatalf("unknown id: %d", gone.status)
	}
}

// Fifty clients asking for the same new figure at once cause one run.
func TestRenderIdenticalRequestsRunOnce(t *testing.T) {
	ts := startService(t, 2, nil)
	before := ts.compiles(t)
	figure := []byte("for (int i = 0; i < 200000; ++i) {} draw((0,0)--(1,2));\n")
	var wg sync.WaitGroup
	answers := make([]answer, 50)
	for i := range answers {
		wg.Go(func() { answers[i] = ts.postRender(t, "", "text/plain", figure) })
	}
	wg.Wait()
	for i, a := range answers {
		if a.status != http.StatusOK || !bytes.Equal(a.body, answers[0].body) {
			t.Fatalf("answer %d: %d", i, a.status)
		}
	}
	if ran := ts.compiles(t) - before; ran != 1 {
		t.Fatalf("%d runs for 50 identical requests, want 1", ran)
	}
}

// A figure can put a raw <script> into its svg; it is served sandboxed.
func TestRenderScriptInSVGIsSandboxed(t *testing.T) {
	ts := startService(t, 1, nil)
	a := ts.postRender(t, "", "text/plain", []byte(hostileSVG))
	if a.status != http.StatusOK || !bytes.Contains(a.body, []byte("<script>")) {
		t.Fatalf("status %d; the svg holds a <script>: %t", a.status, bytes.Contains(a.body, []byte("<script>")))
	}
	csp := a.header.Get("Content-Security-Policy")
	if !strings.HasPrefix(csp, "sandbox;") || strings.Contains(csp, "allow-scripts") || strings.Contains(csp, "script-src") {
		t.Fatalf("Content-Security-Policy %q lets the script run", csp)
	}
}

const hostileSVG = "label(\"\\special{dvisvgm:raw <script>alert(document.domain)</script>}\");\n"

// Several files: the part named main is the main file, others are
// modules it imports.
func TestRenderMultipartWithModule(t *testing.T) {
	ts := startService(t, 1, nil)
	body, ct := multipartBody(t, []part{
		{field: "main", name: "fig.asy", data: "import shapes; square();\n"},
		{field: "file", name: "shapes.asy", data: "void square() { draw(unitsquare); }\n"},
		{field: "timeout", data: fmt.Sprint(ts.queue.Timeouts()[0].Milliseconds())},
	})
	a := ts.postRender(t, "?format=png", ct, body)
	if a.status != http.StatusOK || !sandbox.HasMagic("png", a.body) {
		t.Fatalf("status %d: %s", a.status, a.body[:min(200, len(a.body))])
	}
}

type part struct{ field, name, data string }

func multipartBody(t testing.TB, parts []part) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, p := range parts {
		var err error
		var pw io.Writer
		if p.name == "" {
			pw, err = w.CreateFormField(p.field)
		} else {
			h := make(map[string][]string)
			h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name=%q; filename=%q`, p.field, p.name)}
			pw, err = w.CreatePart(h)
		}
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(pw, p.data)
	}
	w.Close()
	return b.Bytes(), w.FormDataContentType()
}

// Bad input gets a specific 4xx with a JSON error and changes nothing:
// no task runs, no source is kept.
func TestRenderBadInputIsRefused(t *testing.T) {
	ts := startService(t, 1, nil)
	maxUpload := ts.queueCfg.MaxUpload
	huge := bytes.Repeat([]byte("/"), int(maxUpload)+1)
	brokenBody, brokenCT := multipartBody(t, []part{{field: "main", name: "a.asy", data: "draw(unitcircle);"}})
	brokenBody = brokenBody[:len(brokenBody)-10]
	traversal, traversalCT := multipartBody(t, []part{{field: "main", name: "../evil.asy", data: "draw(unitcircle);"}})
	slash, slashCT := multipartBody(t, []part{{field: "main", name: "dir/evil.asy", data: "draw(unitcircle);"}})
	noMain, noMainCT := multipartBody(t, []part{{field: "file", name: "a.asy", data: "x"}, {field: "file", name: "b.asy", data: "y"}})
	twice, twiceCT := multipartBody(t, []part{{field: "main", name: "a.asy", data: "x"}, {field: "file", name: "a.asy", data: "y"}})
	unknown, unknownCT := multipartBody(t, []part{{field: "main", name: "a.asy", data: "x"}, {field: "verbosity", data: "3"}})
	longSrc := url.QueryEscape(strings.Repeat("//", renderapi.MaxQuerySource))
	tests := []struct {
		name, method, path, contentType string
		body                            []byte
		status                          int
		says                            string
	}{
		{"oversized body", "POST", "/api/render", "text/plain", huge, 413, "too large"},
		{"oversized query", "GET", "/api/render?src=" + longSrc, "", nil, 414, "POST"},
		{"broken multipart", "POST", "/api/render", brokenCT, brokenBody, 400, "multipart"},
		{"no boundary", "POST", "/api/render", "multipart/form-data", []byte("x"), 400, "boundary"},
		{"bad format", "POST", "/api/render?format=gif", "text/plain", []byte(quickFigure), 400, "gif"},
		{"v3d format", "GET", "/api/render?format=v3d&src=x", "", nil, 400, "v3d"},
		{"bad timeout", "POST", "/api/render?timeout=7", "text/plain", []byte(quickFigure), 400, "timeout"},
		{"unparsable timeout", "POST", "/api/render?timeout=soon", "text/plain", []byte(quickFigure), 400, "timeout"},
		{"dot-dot name", "POST", "/api/render", traversalCT, traversal, 400, ".."},
		{"slash in name", "POST", "/api/render", slashCT, slash, 400, "/"},
		{"no main", "POST", "/api/render", noMainCT, noMain, 400, "main"},
		{"file twice", "POST", "/api/render", twiceCT, twice, 400, "twice"},
		{"unknown field", "POST", "/api/render", unknownCT, unknown, 400, "verbosity"},
		{"unknown parameter", "GET", "/api/render?src=x&shell=1", "", nil, 400, "shell"},
		{"no src", "GET", "/api/render?format=svg", "", nil, 400, "src"},
		{"bad content type", "POST", "/api/render", "application/json", []byte("{}"), 415, "Content-Type"},
		{"bad id", "GET", "/api/render/..%2f..%2fetc%2fpasswd.svg", "", nil, 404, "no such render"},
		{"unknown id", "GET", "/api/render/" + strings.Repeat("0", 64) + ".svg", "", nil, 404, "no such render"},
	}
	before := ts.compiles(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, ts.srv.URL+tt.path, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			a := do(t, req)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d: %s", a.status, tt.status, a.body)
			}
			if text, _ := a.errorText(t); !strings.Contains(text, tt.says) {
				t.Fatalf("error %q does not say %q", text, tt.says)
			}
		})
	}
	if ran := ts.compiles(t) - before; ran != 0 {
		t.Fatalf("%d runs for refused requests", ran)
	}
	var kept int
	if err := ts.db.QueryRow(`SELECT COUNT(*) FROM render_sources`).Scan(&kept); err != nil || kept != 0 {
		t.Fatalf("%d sources kept for refused requests (%v)", kept, err)
	}
}

// Hostile asy through GET gets asy's own refusal as a 422 and leaves
// nothing behind: no file outside the task, no kept source, no work
// directory, no task.
func TestRenderHostileFigureThroughGET(t *testing.T) {
	ts := startService(t, 1, nil)
	for _, tt := range []struct{ src, says string }{
		{`file f = output("/tmp/usher-render-escape.asy"); write(f, "x");`, "Write to other directories disabled"},
		{`string s = input("/etc/passwd"); write(s);`, "Read from other directories disabled"},
	} {
		a := ts.get(t, "/api/render?src="+url.QueryEscape(tt.src), nil)
		if a.status != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %d %s", tt.src, a.status, a.body)
		}
		if _, output := a.errorText(t); !strings.Contains(output, tt.says) || strings.Contains(output, "root:x:0") {
			t.Fatalf("%s: output %q, want %q", tt.src, output, tt.says)
		}
	}
	if _, err := os.Stat("/tmp/usher-render-escape.asy"); err == nil {
		t.Fatal("the figure wrote a file on the host")
	}
	var kept int
	if err := ts.db.QueryRow(`SELECT COUNT(*) FROM render_sources`).Scan(&kept); err != nil || kept != 0 {
		t.Fatalf("%d sources kept for failed renders (%v)", kept, err)
	}
	ts.waitIdle(t)
}

// /embed.js and the render API follow the origin policy: a page of an
// allowed origin (--allowed-origins) may load the script and POST a
// figure, with CORS headers; any other origin's page is refused before any
// work.
func TestEmbedScriptAndRenderFollowTheOrigins(t *testing.T) {
	ts := startService(t, 1, func(c *Config) {
		o, err := access.NewOrigins([]string{"https://forum.example"})
		if err != nil {
			t.Fatal(err)
		}
		c.Access.Origins = o
	})
	a := ts.get(t, "/embed.js", http.Header{"Origin": {"https://forum.example"}})
	if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/javascript") ||
		!bytes.Contains(a.body, []byte("/api/render")) {
		t.Fatalf("/embed.js: %d %q", a.status, a.header.Get("Content-Type"))
	}
	if got := a.header.Get("Access-Control-Allow-Origin"); got != "https://forum.example" {
		t.Fatalf("/embed.js for an allowed origin: Access-Control-Allow-Origin %q", got)
	}
	if a := ts.get(t, "/embed.js", http.Header{"Origin": {"https://elsewhere.example"}}); a.status != http.StatusForbidden {
		t.Fatalf("/embed.js for another origin: %d; want 403", a.status)
	}
	src := url.QueryEscape("size(1cm); draw(unitcircle);")
	if a := ts.get(t, "/api/render?format=svg&src="+src, http.Header{"Referer": {"https://elsewhere.example/thread/1"}}); a.status != http.StatusForbidden {
		t.Fatalf("an <img> render from another origin's page: %d; want 403", a.status)
	}
	if a := ts.get(t, "/api/render?format=svg&src="+src, http.Header{"Referer": {"https://forum.example/thread/1"}}); a.status != http.StatusOK {
		t.Fatalf("an <img> render from an allowed page: %d %s", a.status, a.body)
	}
}

// A render waits in the same queue as /asy tasks: it shows on the
// dashboard's count while the only backend is busy, and runs after.
func TestRenderWaitsInTheSameQueue(t *testing.T) {
	ts := startService(t, 1, nil)
	occupy(t, ts, 1, map[string]any{"timeout": 3000})
	done := make(chan answer, 1)
	go func() { done <- ts.postRender(t, "", "text/plain", []byte("draw((0,0)--(4,1));\n")) }()
	testwait.Eventually(t, 10*time.Second, func() bool {
		snap, err := ts.dispatcher().Snapshot()
		return err == nil && snap.Queues[0].Queued == 1
	}, "the render is queued behind the spinner")
	a := testwait.Receive(t, 30*time.Second, done, "the render's answer")
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
}

// A render whose every caller has gone is aborted, as a WebSocket task
// whose client closes: it leaves the queue at once.
func TestRenderAbandonedLeavesTheQueue(t *testing.T) {
	ts := startService(t, 1, nil)
	occupy(t, ts, 1, map[string]any{"timeout": 3000})
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.srv.URL+"/api/render", strings.NewReader("draw((0,0)--(5,1));\n"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	gone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	queued := func() int {
		snap, err := ts.dispatcher().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return snap.Queues[0].Queued
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return queued() == 1 }, "the render is queued")
	cancel()
	testwait.Receive(t, 10*time.Second, gone, "the client gave up")
	start := time.Now()
	testwait.Eventually(t, 10*time.Second, func() bool { return queued() == 0 }, "the abandoned render left the queue")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the abandoned render left the queue after %v: it waited for the spinner", took)
	}
	before := ts.compiles(t)
	ts.waitIdle(t)
	if ran := ts.compiles(t) - before; ran != 1 {
		t.Fatalf("%d runs after the render was abandoned, want the spinner's only", ran)
	}
}
