package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/dashboard"
)

// call makes one request to the test service and decodes its JSON answer.
func call(t *testing.T, ts *testService, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, ts.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, out
}

func TestAPIInfoDescribesTheService(t *testing.T) {
	ts := startService(t, 1, nil)
	status, body := call(t, ts, "GET", "/api/info", "")
	if status != http.StatusOK || !strings.HasPrefix(fmt.Sprint(body["asyVersion"]), "Asymptote version") {
		t.Fatalf("info %d %v", status, body)
	}
	if fmt.Sprint(body["timeouts"]) != "[3000 10000 30000]" || fmt.Sprint(body["formats"]) != "[svg pdf png html eps v3d]" {
		t.Fatalf("info %v", body)
	}
	if body["maxFiles"] != float64(32) || body["maxUpload"] != float64(64<<10) || body["maxShare"] != float64(256<<10) {
		t.Fatalf("info caps %v", body)
	}
	if fmt.Sprint(body["extensions"]) != "[.asy .csv .dat .txt .tsv .json .tex .png .jpg .jpeg .eps .pdf]" ||
		fmt.Sprint(body["binaryExtensions"]) != "[.png .jpg .jpeg .pdf]" {
		t.Fatalf("info extensions %v, binary %v", body["extensions"], body["binaryExtensions"])
	}
}

// A binary file is shared in base64 and comes back the same; a text file
// stays text.
func TestShareBinaryFile(t *testing.T) {
	ts := startService(t, 1, nil)
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x01\xff"))
	body := `{"files":[{"filename":"main.asy","main":true,"content":"graphic(\"p.png\");"},` +
		`{"filename":"p.png","main":false,"content":"` + png + `","encoding":"base64"},` +
		`{"filename":"d.csv","main":false,"content":"1,2\n"}]}`
	status, created := call(t, ts, "POST", "/api/shares", body)
	if status != http.StatusCreated {
		t.Fatalf("POST %d %v", status, created)
	}
	_, got := call(t, ts, "GET", "/api/shares/"+created["id"].(string), "")
	want := `[map[content:graphic("p.png"); filename:main.asy main:true] map[content:` + png +
		` encoding:base64 filename:p.png main:false] map[content:1,2` + "\n" + ` filename:d.csv main:false]]`
	if fmt.Sprint(got["files"]) != want {
		t.Fatalf("GET files %v\nwant %v", got["files"], want)
	}
}

func shareBody(files ...string) string {
	var parts []string
	for i, f := range files {
		parts = append(parts, fmt.Sprintf(`{"filename":%q,"main":%t,"content":"draw(unitcircle);"}`, f, i == 0))
	}
	return `{"files":[` + strings.Join(parts, ",") + `]}`
}

func TestShareRoundTrip(t *testing.T) {
	ts := startService(t, 1, nil)
	status, created := call(t, ts, "POST", "/api/shares", shareBody("main.asy", "lib.asy"))
	id, _ := created["id"].(string)
	if status != http.StatusCreated || created["url"] != "/s/"+id || len(id) != 22 {
		t.Fatalf("POST %d %v", status, created)
	}
	if status, again := call(t, ts, "POST", "/api/shares", shareBody("main.asy", "lib.asy")); status != http.StatusOK || again["id"] != id {
		t.Fatalf("second POST %d %v, want 200 with the same id", status, again)
	}
	status, got := call(t, ts, "GET", "/api/shares/"+id, "")
	files, _ := got["files"].([]any)
	if status != http.StatusOK || len(files) != 2 || files[0].(map[string]any)["filename"] != "main.asy" {
		t.Fatalf("GET %d %v", status, got)
	}
}

func TestShareRefusals(t *testing.T) {
	ts := startService(t, 1, func(c *Config) { c.ShareBytes = 1000 })
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"unknown share", "GET", "/api/shares/" + strings.Repeat("A", 22), "", 404, "no share"},
		{"malformed id", "GET", "/api/shares/nope", "", 400, `"id" "nope"`},
		{"no files", "POST", "/api/shares", `{"files":[]}`, 400, `"files"`},
		{"two mains", "POST", "/api/shares", `{"files":[{"filename":"a.asy","main":true},{"filename":"b.asy","main":true}]}`, 400, "exactly one file"},
		{"bad name", "POST", "/api/shares", shareBody("../a.asy"), 400, `"filename"`},
		{"data file like ../x.csv", "POST", "/api/shares", shareBody("a.asy", "../x.csv"), 400, `"filename" "../x.csv": file name contains "/"`},
		{"png that is text", "POST", "/api/shares", shareBody("a.asy", "p.png"), 400, `file "p.png" is not a PNG image`},
		{"extension", "POST", "/api/shares", shareBody("a.asy", "p.svg"), 400, "file name extension is not allowed"},
		{"unknown field", "POST", "/api/shares", `{"files":[],"owner":"x"}`, 400, `unknown field "owner"`},
		{"not JSON", "POST", "/api/shares", `files`, 400, "malformed request"},
		{"content too large", "POST", "/api/shares", `{"files":[{"filename":"a.asy","main":true,"content":"` + strings.Repeat("x", 1001) + `"}]}`, 413, "at most 1000"},
		{"body too large", "POST", "/api/shares", `{"files":[{"filename":"a.asy","main":true,"content":"` + strings.Repeat("x", 80<<10) + `"}]}`, 413, "too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, ts, tc.method, tc.path, tc.body)
			if status != tc.status || !strings.Contains(fmt.Sprint(body["error"]), tc.want) {
				t.Fatalf("%d %v, want %d with an error containing %q", status, body, tc.status, tc.want)
			}
		})
	}
}

func FuzzShareRequest(f *testing.F) {
	f.Add([]byte(shareBody("main.asy")))
	f.Add([]byte(`{"files":[{"filename":"a.asy","main":true,"content":"\u00ff"}]}`))
	f.Add([]byte(`{"files":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req shareRequest
		if err := decodeStrict(bytes.NewReader(body), &req); err != nil && !strings.HasPrefix(err.Error(), "malformed request") {
			t.Fatalf("decodeStrict(%q) = %v", body, err)
		}
	})
}

// dashboardStream reads /api/dashboard's snapshots.
type dashboardStream struct {
	t    *testing.T
	body io.ReadCloser
	sc   *bufio.Scanner
}

// streamDeadline bounds a test's whole read of the dashboard stream, so
// that a stream that stalls fails the test instead of hanging it.
const streamDeadline = 60 * time.Second

func openDashboard(t *testing.T, ts *testService) *dashboardStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamDeadline)
	resp := ts.adminGet(t, ctx, "/api/dashboard")
	t.Cleanup(func() { resp.Body.Close(); cancel() })
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	return &dashboardStream{t: t, body: resp.Body, sc: sc}
}

// next returns the next snapshot; ok is false once the server ended the
// stream. A stream cut by its deadline fails the test.
func (d *dashboardStream) next() (dashboard.State, bool) {
	d.t.Helper()
	doc, _, ok := d.nextDoc()
	return doc.State, ok
}

// nextDoc returns the next snapshot as a whole and as sent.
func (d *dashboardStream) nextDoc() (doc dashboard.Dashboard, raw string, ok bool) {
	d.t.Helper()
	sawEvent := false
	for d.sc.Scan() {
		line := d.sc.Text()
		if line == "event: snapshot" {
			sawEvent = true
		}
		if data, found := strings.CutPrefix(line, "data: "); found && sawEvent {
			if err := json.Unmarshal([]byte(data), &doc); err != nil {
				d.t.Fatalf("snapshot %q: %v", data, err)
			}
			return doc, data, true
		}
	}
	if err := d.sc.Err(); err != nil {
		d.t.Fatalf("reading the dashboard stream: %v", err)
	}
	return doc, "", false
}

// until reads snapshots until one satisfies cond (within 20 s).
func (d *dashboardStream) until(what string, cond func(dashboard.State) bool) dashboard.State {
	d.t.Helper()
	return d.untilDoc(what, func(doc dashboard.Dashboard) bool { return cond(doc.State) }).State
}

// untilDoc reads snapshots until one satisfies cond (within 20 s).
func (d *dashboardStream) untilDoc(what string, cond func(dashboard.Dashboard) bool) dashboard.Dashboard {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		doc, raw, ok := d.nextDoc()
		if !ok {
			d.t.Fatalf("stream ended before %s", what)
		}
		if cond(doc) {
			return doc
		}
		last = raw
	}
	d.t.Fatalf("no snapshot with %s; the last:\n%s", what, last)
	return dashboard.Dashboard{}
}

func TestDashboardShowsRunningQueuedAndEvents(t *testing.T) {
	ts := startService(t, 1, nil)
	dash := openDashboard(t, ts)
	doc, raw, _ := dash.nextDoc()
	first := doc.State
	if len(first.Tiers) != 3 || len(first.Backends) != 1 || first.Backends[0].State != "idle" {
		t.Fatalf("first snapshot %+v", first)
	}
	// Single-node mode names no leader and always has its own data.
	if strings.Contains(raw, `"leader"`) || strings.Contains(raw, `"noData"`) || !strings.Contains(raw, `"jobs":{`) {
		t.Fatalf("single-node snapshot %s", raw)
	}
	occupy(t, ts, 1, map[string]any{"timeout": 3000})
	waiting := dial(t, ts.srv)
	waiting.compile(quickFigure, map[string]any{"timeout": 10000})
	bad := dial(t, ts.srv)
	bad.send("options", map[string]any{"format": "gif"})
	final(t, bad.rest())
	st := dash.until("a running task, a queued one and a denial", func(st dashboard.State) bool {
		return len(st.Running) == 1 && len(st.Queue) == 1 && len(st.Events) > 0
	})
	if r := st.Running[0]; r.Class != "fast" || r.Tier != "fast" || r.Backend != "local-1" || st.Backends[0].State != "busy" {
		t.Fatalf("running %+v, backends %+v", r, st.Backends)
	}
	if q := st.Queue[0]; q.Class != "medium" || q.Position != 0 || q.EstimateMS == nil {
		t.Fatalf("queued %+v", q)
	}
	if e := st.Events[0]; e.Kind != "denial" || !strings.Contains(e.Detail, `"format"`) {
		t.Fatalf("event %+v", e)
	}
	final(t, waiting.rest())
	dash.until("a completion rate", func(st dashboard.State) bool { return st.TasksPerSecond > 0 })
}

func TestDashboardStreamEndsAtShutdown(t *testing.T) {
	ts := startService(t, 1, nil)
	dash := openDashboard(t, ts)
	dash.next()
	go ts.shutdown(&http.Server{})
	// Snapshots come every second while the stream lives.
	deadline := time.Now().Add(10 * time.Second)
	for _, ok := dash.next(); ok; _, ok = dash.next() {
		if time.Now().After(deadline) {
			t.Fatal("the dashboard stream still sends snapshots 10 s after shutdown began")
		}
	}
}

func TestDashboardShowsAnUnreachableRemoteBackendAsDown(t *testing.T) {
	nowhere := httptest.NewServer(nil)
	url := "ws" + strings.TrimPrefix(nowhere.URL, "http")
	nowhere.Close()
	ts := startService(t, 1, func(c *Config) { c.RemoteBackends = []string{url} })
	st := openDashboard(t, ts).until("the remote backend down", func(st dashboard.State) bool {
		return len(st.Backends) == 2
	})
	for _, b := range st.Backends {
		if want := map[bool]string{true: "down", false: "idle"}[b.ID == url]; b.State != want {
			t.Fatalf("backend %s is %s, want %s", b.ID, b.State, want)
		}
	}
}
