package service

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
)

// The leader here is a plain HTTP server standing in for the scheduler's
// /v1; what is under test is the queue server's proxy, on real Redis.
func TestLeaderProxyFollowsTheLeader(t *testing.T) {
	srv := redistest.Start(t)
	rdb, err := redisq.Open(t.Context(), srv.URL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	key := redisq.NewKeys(redisq.DefaultPrefix).SchedulerAPI()
	p := newLeaderProxy(rdb, key, slog.New(slog.DiscardHandler))
	front := httptest.NewServer(p)
	defer front.Close()

	leader := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, name+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		}))
	}
	get := func() (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", front.URL+"/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer usher_x")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	if code, body := get(); code != http.StatusServiceUnavailable {
		t.Fatalf("no leader: %d %s, want 503", code, body)
	}
	a := leader("a")
	rdb.Set(t.Context(), key, a.URL, 0)
	if code, body := get(); code != 200 || body != "a /v1/stats Bearer usher_x" {
		t.Fatalf("leader a: %d %q", code, body)
	}
	a.Close() // the leader dies; a standby takes over
	if code, _ := get(); code != http.StatusServiceUnavailable {
		t.Fatalf("dead leader: %d, want 503", code)
	}
	b := leader("b")
	defer b.Close()
	rdb.Set(t.Context(), key, b.URL, 0)
	if code, body := get(); code != 200 || body != "b /v1/stats Bearer usher_x" {
		t.Fatalf("leader b: %d %q", code, body)
	}
}
