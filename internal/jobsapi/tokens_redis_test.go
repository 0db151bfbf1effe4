package jobsapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/tokens"
)

// With tokens in Redis, a known token passes, an unknown one is 401, and
// a Redis that is gone is 503 (the server cannot tell), not 401.
func TestRedisTokens(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb, err := redisq.Open(ctx, srv.URL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	toks := tokens.OpenRedis(rdb, redisq.DefaultPrefix, 0, nil)
	_, secret, err := toks.Create(ctx, "admin", tokens.Admin)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(jobsapi.Handler(jobsapi.Config{Tokens: toks}))
	defer hs.Close()
	get := func(secret string) int {
		req, _ := http.NewRequest("GET", hs.URL+"/v1/tokens", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name   string
		secret string
		want   int
	}{
		{"known", secret, 200},
		{"unknown", secret + "x", 401},
	} {
		if got := get(tc.secret); got != tc.want {
			t.Errorf("%s token: %d; want %d", tc.name, got, tc.want)
		}
	}
	srv.Kill()
	if got := get(secret + "y"); got != http.StatusServiceUnavailable {
		t.Errorf("with Redis gone: %d; want 503", got)
	}
}
