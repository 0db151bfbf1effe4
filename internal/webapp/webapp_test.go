package webapp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandler checks each route serves the right embedded file with its
// content type and cache policy, and that unknown paths are 404.
func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	tests := []struct {
		path, status, ctype, cache, contains string
	}{
		{"/", "200 OK", "text/html; charset=utf-8", "no-cache", `<div id="editor">`},
		{"/s/abc123", "200 OK", "text/html; charset=utf-8", "no-cache", `<div id="editor">`},
		{"/tex", "200 OK", "text/html; charset=utf-8", "no-cache", `id="tex-packages"`},
		{"/assets/tex.js", "200 OK", "text/javascript; charset=utf-8", "public, max-age=300", "/api/tex"},
		{"/dashboard", "200 OK", "text/html; charset=utf-8", "no-cache", `id="charts"`},
		{"/jobs", "200 OK", "text/html; charset=utf-8", "no-cache", `id="login-form"`},
		{"/jobs/job/812", "200 OK", "text/html; charset=utf-8", "no-cache", `src="/assets/jobs.js"`},
		{"/jobs/list?queue=a&state=failed", "200 OK", "text/html; charset=utf-8", "no-cache", `id="jobs-main"`},
		{"/assets/jobs.js", "200 OK", "text/javascript; charset=utf-8", "public, max-age=300", "/whoami"},
		{"/assets/jobs.css", "200 OK", "text/css; charset=utf-8", "public, max-age=300", "#dag"},
		{"/assets/app.js", "200 OK", "text/javascript; charset=utf-8", "public, max-age=300", "/asy"},
		{"/assets/dashboard.js", "200 OK", "text/javascript; charset=utf-8", "public, max-age=300", "/api/dashboard"},
		{"/assets/dashboard.css", "200 OK", "text/css; charset=utf-8", "public, max-age=300", ".uplot"},
		{"/assets/style.css", "200 OK", "text/css; charset=utf-8", "public, max-age=300", "--accent"},
		{"/assets/nope.js", "404 Not Found", "", "", ""},
		{"/index.html", "404 Not Found", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatalf("GET %s: %v", tc.path, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.Status != tc.status {
				t.Fatalf("GET %s: status %q, want %q", tc.path, resp.Status, tc.status)
			}
			if tc.ctype == "" {
				return
			}
			if got := resp.Header.Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type %q, want %q", got, tc.ctype)
			}
			if got := resp.Header.Get("Cache-Control"); got != tc.cache {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
			if !strings.Contains(string(body), tc.contains) {
				t.Errorf("body of %s lacks %q", tc.path, tc.contains)
			}
		})
	}
}
