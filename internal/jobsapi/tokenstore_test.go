package jobsapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redisjobs"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/tokens"
)

// When the token store cannot be reached (multi-node mode's Redis is down
// or restarting), a request whose token is not cached gets 503 with
// Retry-After, which clients and agents retry, not 401 (which would make
// an agent give up on a good token) nor a bare 500.
func TestTokenStoreDownAnswers503(t *testing.T) {
	srv := redistest.Start(t)
	rdb, err := redisq.Open(context.Background(), srv.URL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	api := jobsapitest.StartOn(t, redisjobs.New(rdb, keys.Prefix(), redisjobs.Fence{}, nil), tokens.OpenRedis(rdb, keys.Prefix(), 0, nil), jobsapitest.Options{})

	call := func() *http.Response {
		req, err := http.NewRequest("GET", api.URL+"/v1/queues", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer usher_never-seen-before-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := call(); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unknown token with Redis up: %d, want 401", resp.StatusCode)
	}
	srv.Kill()
	resp := call()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a token with Redis down: %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		t.Fatalf("content type %q, want a JSON error", resp.Header.Get("Content-Type"))
	}
}
