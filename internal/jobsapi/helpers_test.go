package jobsapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
)

// call sends a request with a JSON (or, for a string, plain) body and
// returns the status and the decoded answer.
func call(t *testing.T, s *jobsapitest.Server, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd, ctype = strings.NewReader(b), "text/plain"
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, data)
		}
	}
	return resp.StatusCode, out
}

// must is call that fails the test unless the status is want.
func must(t *testing.T, s *jobsapitest.Server, method, path string, body any, want int) map[string]any {
	t.Helper()
	status, out := call(t, s, s.AdminToken, method, path, body)
	if status != want {
		t.Fatalf("%s %s = %d %v; want %d", method, path, status, out, want)
	}
	return out
}

// strs reads a JSON array of strings.
func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
