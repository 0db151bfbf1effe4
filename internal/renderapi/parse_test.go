package renderapi

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/sandbox"
)

var (
	testLimits  = limits{maxFiles: 4, maxUpload: 1 << 10}
	queryLimits = limits{maxFiles: 1, maxUpload: MaxQuerySource}
)

// checkParsed asserts what every accepted request gives the queue: a
// known format, at most the limits' files and bytes, names that pass the
// sandbox's rules, a non-negative timeout.
func checkParsed(t *testing.T, lim limits, task sandbox.Task, aerr *apiError) {
	t.Helper()
	if aerr != nil {
		if aerr.status < 400 || aerr.status > 499 || aerr.text == "" {
			t.Fatalf("refusal %d %q: want a 4xx with a text", aerr.status, aerr.text)
		}
		return
	}
	if !slices.Contains(Formats, task.Format) {
		t.Fatalf("format %q accepted", task.Format)
	}
	if len(task.Files) == 0 || len(task.Files) > lim.maxFiles {
		t.Fatalf("%d files accepted", len(task.Files))
	}
	var total int64
	for _, f := range task.Files {
		if err := sandbox.CheckFileName(f.Name); err != nil {
			t.Fatalf("file name %q accepted: %v", f.Name, err)
		}
		total += int64(len(f.Data))
	}
	if total > lim.maxUpload {
		t.Fatalf("%d bytes accepted, limit %d", total, lim.maxUpload)
	}
	if task.Timeout < 0 {
		t.Fatalf("timeout %v", task.Timeout)
	}
}

func postRequest(query, contentType string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/api/render", bytes.NewReader(body))
	r.URL.RawQuery = query
	r.Header.Set("Content-Type", contentType)
	return r
}

func multipartOf(t testing.TB, boundary string, parts [][3]string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		h := map[string][]string{"Content-Disposition": {fmt.Sprintf(`form-data; name=%q; filename=%q`, p[0], p[1])}}
		if p[1] == "" {
			h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name=%q`, p[0])}
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write([]byte(p[2]))
	}
	w.Close()
	return b.Bytes()
}

func TestParsePost(t *testing.T) {
	const bd = "XyZ"
	mp := "multipart/form-data; boundary=" + bd
	tests := []struct {
		name        string
		query, ct   string
		body        []byte
		status      int // 0: accepted
		files, main int
	}{
		{"text body", "format=png", "text/plain; charset=utf-8", []byte("draw(unitcircle);"), 0, 1, 1},
		{"no content type", "", "", []byte("x"), 0, 1, 1},
		{"one file is main", "", mp, multipartOf(t, bd, [][3]string{{"file", "a.asy", "x"}}), 0, 1, 1},
		{"main and module", "timeout=1000", mp, multipartOf(t, bd, [][3]string{{"main", "a.asy", "x"}, {"f", "b.asy", "y"}}), 0, 2, 1},
		{"timeout field", "", mp, multipartOf(t, bd, [][3]string{{"main", "a.asy", "x"}, {"timeout", "", "3000"}}), 0, 1, 1},
		{"too many files", "", mp, multipartOf(t, bd, [][3]string{{"f", "a.asy", ""}, {"f", "b.asy", ""}, {"f", "c.asy", ""}, {"f", "d.asy", ""}, {"f", "e.asy", ""}, {"f", "g.asy", ""}}), 400, 0, 0},
		{"too many bytes", "", mp, multipartOf(t, bd, [][3]string{{"main", "a.asy", strings.Repeat("x", 600)}, {"f", "b.asy", strings.Repeat("y", 600)}}), 413, 0, 0},
		{"text too large", "", "text/plain", bytes.Repeat([]byte("x"), 1025), 413, 0, 0},
		{"backslash name", "", mp, multipartOf(t, bd, [][3]string{{"main", `..\a.asy`, "x"}}), 400, 0, 0},
		{"absolute name", "", mp, multipartOf(t, bd, [][3]string{{"main", "/etc/a.asy", "x"}}), 400, 0, 0},
		{"not asy", "", mp, multipartOf(t, bd, [][3]string{{"main", "a.sh", "x"}}), 400, 0, 0},
		{"data file", "", mp, multipartOf(t, bd, [][3]string{{"main", "a.asy", "x"}, {"f", "d.csv", "1,2\n"}, {"f", "p.png", "\x89PNG\r\n\x1a\n"}}), 0, 3, 1},
		{"png that is text", "", mp, multipartOf(t, bd, [][3]string{{"main", "a.asy", "x"}, {"f", "p.png", "x"}}), 400, 0, 0},
		{"data file outside", "", mp, multipartOf(t, bd, [][3]string{{"main", "a.asy", "x"}, {"f", "../x.csv", "1"}}), 400, 0, 0},
		{"unknown query", "src=x", "text/plain", []byte("x"), 400, 0, 0},
		{"bad media type", "", "text/plain; ===", []byte("x"), 415, 0, 0},
		{"negative timeout", "timeout=-5", "text/plain", []byte("x"), 400, 0, 0},
		{"huge timeout", "timeout=99999999999", "text/plain", []byte("x"), 400, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, aerr := parsePost(postRequest(tt.query, tt.ct, tt.body), testLimits)
			checkParsed(t, testLimits, task, aerr)
			switch {
			case tt.status != 0 && (aerr == nil || aerr.status != tt.status):
				t.Fatalf("got %v, want status %d", aerr, tt.status)
			case tt.status == 0 && aerr != nil:
				t.Fatalf("refused: %d %s", aerr.status, aerr.text)
			case tt.status == 0:
				mains := 0
				for _, f := range task.Files {
					if f.Main {
						mains++
					}
				}
				if len(task.Files) != tt.files || mains != tt.main {
					t.Fatalf("%d files, %d main; want %d, %d", len(task.Files), mains, tt.files, tt.main)
				}
			}
		})
	}
}

func TestParseQuery(t *testing.T) {
	tests := []struct {
		query  string
		status int
	}{
		{"src=draw(unitcircle)%3B", 0},
		{"format=png&src=x&timeout=1000", 0},
		{"src=" + strings.Repeat("x", MaxQuerySource), 0},
		{"src=" + strings.Repeat("x", MaxQuerySource+1), 414},
		{"src=" + strings.Repeat("%41", MaxQuerySource+100), 414},
		{"src=a&src=b", 400},
		{"src=%zz", 400},
		{"format=svg", 400},
		{"format=v3d&src=x", 400},
	}
	for _, tt := range tests {
		name := tt.query[:min(40, len(tt.query))]
		t.Run(name, func(t *testing.T) {
			task, aerr := parseQuery(tt.query)
			checkParsed(t, queryLimits, task, aerr)
			if (aerr == nil) != (tt.status == 0) || (aerr != nil && aerr.status != tt.status) {
				t.Fatalf("got %v, want status %d", aerr, tt.status)
			}
		})
	}
}

// FuzzParsePost feeds arbitrary bodies, content types and queries to the
// POST parser: it never panics, refuses with a 4xx and a text, and what it
// accepts is within the limits with valid names.
func FuzzParsePost(f *testing.F) {
	f.Add("format=svg", "text/plain", []byte("draw(unitcircle);"))
	f.Add("", "multipart/form-data; boundary=B", multipartOf(f, "B", [][3]string{{"main", "a.asy", "x"}, {"timeout", "", "3000"}}))
	f.Add("", "multipart/form-data; boundary=B", []byte("--B\r\nContent-Disposition: form-data; name=\"main\"; filename=\"../a.asy\"\r\n\r\nx\r\n--B--"))
	f.Add("timeout=x", "multipart/form-data", []byte("--"))
	f.Fuzz(func(t *testing.T, query, ct string, body []byte) {
		if _, err := url.ParseQuery(query); err != nil && len(query) > maxRawQuery {
			return
		}
		task, aerr := parsePost(postRequest(url.PathEscape(query), ct, body), testLimits)
		checkParsed(t, testLimits, task, aerr)
		task, aerr = parsePost(postRequest(query, ct, body), testLimits)
		checkParsed(t, testLimits, task, aerr)
	})
}

// FuzzParseQuery: the GET parser never panics, refuses with a 4xx and
// accepts only one source of at most MaxQuerySource bytes.
func FuzzParseQuery(f *testing.F) {
	f.Add("src=draw(unitcircle)%3B&format=png")
	f.Add("src=%00&timeout=1")
	f.Fuzz(func(t *testing.T, query string) {
		task, aerr := parseQuery(query)
		checkParsed(t, queryLimits, task, aerr)
	})
}
