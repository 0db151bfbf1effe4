package jobsapi_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/jobtype"
)

// Key rates through the API (docs/design.md, "Per-key rate limits"): a
// burst's worth of jobs starts at once, the rest wait for their tokens,
// stats show the bucket, and the rate survives a restart.
func TestKeyRateThroughAPI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usher.db")
	s, stop, err := jobsapitest.Open(path, jobsapitest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	queue(t, s, map[string]any{"name": "q"})
	got := mustAs[jobtype.KeyLimit](t, s, "PUT", "/v1/limits", map[string]any{"pattern": "api:*", "rate": "1/h", "burst": 2}, 200)
	if got != (jobtype.KeyLimit{Pattern: "api:*", Rate: "1/h", Burst: 2}) {
		t.Fatalf("PUT answered %+v", got)
	}
	enqueue(t, s, map[string]any{"queue": "q", "keys": []string{"api:stripe"}},
		map[string]any{"queue": "q", "keys": []string{"api:stripe"}},
		map[string]any{"queue": "q", "keys": []string{"api:stripe"}})
	if n := len(lease(t, s, "a", nil, 10, 10)); n != 2 {
		t.Fatalf("leased %d jobs of a key with burst 2; want 2", n)
	}
	if n := len(lease(t, s, "a", nil, 10, 10)); n != 0 {
		t.Fatalf("leased %d more before the next token; want none", n)
	}
	st := mustAs[jobtype.Stats](t, s, "GET", "/v1/stats", nil, 200)
	if len(st.Keys) != 1 || st.Keys[0].Tokens == nil || *st.Keys[0].Tokens != 0 || st.Keys[0].NextToken == nil ||
		st.Keys[0].NextToken.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("stats keys %+v; want api:stripe with no tokens, the next in an hour", st.Keys)
	}
	want := jobtype.KeyLimitList{Limits: []jobtype.KeyLimit{{Pattern: "api:*", Rate: "1/h", Burst: 2}}}
	if l := mustAs[jobtype.KeyLimitList](t, s, "GET", "/v1/limits", nil, 200); !equalLimits(l, want) {
		t.Fatalf("limits %+v; want %+v", l, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s = jobsapitest.StartAt(t, path, jobsapitest.Options{})
	if l := mustAs[jobtype.KeyLimitList](t, s, "GET", "/v1/limits", nil, 200); !equalLimits(l, want) {
		t.Fatalf("limits after a restart %+v; want %+v", l, want)
	}
}

func equalLimits(a, b jobtype.KeyLimitList) bool {
	if len(a.Limits) != len(b.Limits) {
		return false
	}
	for i := range a.Limits {
		if a.Limits[i] != b.Limits[i] {
			return false
		}
	}
	return true
}

// Bad rates and bursts are refused with 400 naming the field, and change
// nothing.
func TestKeyRateBadInput(t *testing.T) {
	s := jobsapitest.Start(t)
	must(t, s, "PUT", "/v1/limits", map[string]any{"pattern": "api:*", "limit": 3, "rate": "10/s", "burst": 5}, 200)
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"pattern": "api:*", "rate": "0/s"}, "rate"},
		{map[string]any{"pattern": "api:*", "rate": "-1/s"}, "rate"},
		{map[string]any{"pattern": "api:*", "rate": "100"}, "rate"},
		{map[string]any{"pattern": "api:*", "rate": "100/d"}, "rate"},
		{map[string]any{"pattern": "api:*", "rate": "lots/s"}, "rate"},
		{map[string]any{"pattern": "api:*", "rate": "10/s", "burst": -1}, "burst"},
		{map[string]any{"pattern": "api:*", "rate": "10/s", "burst": 2000000}, "burst"},
		{map[string]any{"pattern": "api:*", "limit": 2, "burst": 3}, "burst"},
	} {
		status, body := call(t, s, s.AdminToken, "PUT", "/v1/limits", tc.body)
		msg, _ := body["error"].(string)
		if status != 400 || !strings.HasPrefix(msg, tc.field+": ") {
			t.Errorf("PUT %v = %d %v; want 400 naming %s", tc.body, status, body, tc.field)
		}
	}
	want := jobtype.KeyLimitList{Limits: []jobtype.KeyLimit{{Pattern: "api:*", Limit: 3, Rate: "10/s", Burst: 5}}}
	if l := mustAs[jobtype.KeyLimitList](t, s, "GET", "/v1/limits", nil, 200); !equalLimits(l, want) {
		t.Fatalf("limits after refused changes %+v; want %+v", l, want)
	}
}

// An agent waiting for work gets a job held back by a rate when its
// token comes due: the engine's clock wakes for it, nothing else happens
// meanwhile (a key at 2/s, so the token is 500 ms away; the agent waits
// up to 30 s).
func TestKeyRateWakesWaitingAgent(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	must(t, s, "PUT", "/v1/limits", map[string]any{"pattern": "api:x", "rate": "2/s", "burst": 1}, 200)
	enqueue(t, s, map[string]any{"queue": "q", "keys": []string{"api:x"}},
		map[string]any{"queue": "q", "keys": []string{"api:x"}})
	if n := len(lease(t, s, "a", nil, 10, 10)); n != 1 {
		t.Fatalf("leased %d jobs at first; want 1", n)
	}
	start := time.Now()
	got := leaseWait(t, s, "a", nil, 10, 10, 30000)
	if len(got) != 1 {
		t.Fatalf("the waiting agent got %d jobs; want the second job when its token came", len(got))
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("the second job came after %v, before its token", d)
	}
}
