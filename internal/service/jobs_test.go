package service

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On first start the service writes an admin token beside the data file,
// readable only by its owner; /v1 takes it and refuses requests without it.
// A second start keeps the token.
func TestFirstStartWritesAnAdminToken(t *testing.T) {
	dir := t.TempDir()
	ts := startService(t, 0, func(c *Config) { c.DataPath = filepath.Join(dir, "usher.db") })
	path := filepath.Join(dir, "usher-admin.token")
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v; want mode 0600", info, err)
	}
	data, _ := os.ReadFile(path)
	token := strings.TrimSpace(string(data))
	get := func(tok string) int {
		req, _ := http.NewRequest("GET", ts.srv.URL+"/v1/queues", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(token); got != 200 {
		t.Fatalf("GET /v1/queues with the written token = %d; want 200", got)
	}
	if got := get(""); got != 401 {
		t.Fatalf("GET /v1/queues without a token = %d; want 401", got)
	}
	resp := ts.adminGet(t, t.Context(), "/metrics")
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `usher_jobs_total{event="succeeded"} 0`) {
		t.Fatal("/metrics has no usher_jobs_total")
	}
	ts.srv.Close()
	ts.close()
	again := startService(t, 0, func(c *Config) { c.DataPath = filepath.Join(dir, "usher.db") })
	ts.srv = again.srv
	if got := get(token); got != 200 {
		t.Fatalf("after a restart the token gives %d; want 200", got)
	}
	if data2, _ := os.ReadFile(path); string(data2) != string(data) {
		t.Fatal("a second start replaced the admin token")
	}
}

// A server of generic jobs only (no Asymptote backend) is ready once started.
func TestJobsOnlyServerIsReady(t *testing.T) {
	ts := startService(t, 0, nil)
	resp, err := http.Get(ts.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/readyz with --backends 0 = %d; want 200", resp.StatusCode)
	}
}
