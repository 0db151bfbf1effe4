package service

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/asysyms"
	"github.com/usherhq/usher/internal/examples"
	"github.com/usherhq/usher/internal/texinfo"
)

// get requests path with headers and returns the response, body read.
func get(t *testing.T, ts *testService, path string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", ts.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableCompression: true}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if body, err = gzip.NewReader(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	data, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// The editor gets asy's symbols, the TeX list and the examples, each
// cacheable (ETag, 304) and gzip-compressed when the client takes it.
func TestCatalogsServeWhatAsyAndTeXHave(t *testing.T) {
	ts := startService(t, 0, nil)
	var syms asysyms.Catalog
	resp, body := get(t, ts, "/api/symbols", map[string]string{"Accept-Encoding": "gzip"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Cache-Control") == "" {
		t.Fatalf("/api/symbols: %d %v", resp.StatusCode, resp.Header)
	}
	if err := json.Unmarshal(body, &syms); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(syms.AsyVersion, "Asymptote version") || !strings.Contains(strings.Join(syms.Modules, " "), "graph") || len(syms.Keywords) == 0 {
		t.Errorf("symbols: version %q, modules %v, keywords %v", syms.AsyVersion, syms.Modules, syms.Keywords)
	}
	if !hasSymbol(syms.Symbols, "draw", asysyms.KindFunction) || !hasSymbol(syms.Symbols, "pen", asysyms.KindType) {
		t.Errorf("symbols lack draw or pen among %d", len(syms.Symbols))
	}
	etag := resp.Header.Get("ETag")
	if again, _ := get(t, ts, "/api/symbols", map[string]string{"If-None-Match": etag}); again.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match %s: %d", etag, again.StatusCode)
	}
	plain, body := get(t, ts, "/api/symbols", nil)
	if plain.Header.Get("Content-Encoding") != "" || json.Unmarshal(body, &syms) != nil {
		t.Errorf("/api/symbols without gzip: %v", plain.Header)
	}

	var tex texinfo.Catalog
	resp, body = get(t, ts, "/api/tex", nil)
	if resp.StatusCode != 200 || json.Unmarshal(body, &tex) != nil || !strings.Contains(" "+strings.Join(tex.Packages, " ")+" ", " mathptmx ") {
		t.Errorf("/api/tex: %d, %d packages", resp.StatusCode, len(tex.Packages))
	}
	var exs []examples.Example
	resp, body = get(t, ts, "/api/examples", nil)
	if resp.StatusCode != 200 || json.Unmarshal(body, &exs) != nil || len(exs) < 20 || len(exs[0].Files) == 0 || !exs[0].Files[0].Main {
		t.Errorf("/api/examples: %d, %d examples", resp.StatusCode, len(exs))
	}
}

func hasSymbol(syms []asysyms.Symbol, name, kind string) bool {
	for _, s := range syms {
		if s.Name == name && s.Kind == kind {
			return true
		}
	}
	return false
}

// Without asy the endpoint says so, and the rest of the service serves.
func TestSymbolsWithoutAsyAnswer503(t *testing.T) {
	ts := startService(t, 0, func(c *Config) { c.asy = "/nonexistent/asy" })
	status, body := call(t, ts, "GET", "/api/symbols", "")
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(body["error"].(string), "asy could not be asked for its symbols") {
		t.Fatalf("/api/symbols without asy: %d %v", status, body)
	}
	if status, _ := call(t, ts, "GET", "/api/info", ""); status != 200 {
		t.Fatalf("/api/info: %d", status)
	}
}
