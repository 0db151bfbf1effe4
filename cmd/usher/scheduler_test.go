package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testbin"
)

// `usher scheduler` takes the lead under its node name and the prefix it
// is given, exports the leader's metrics at /metrics on --listen, and gives
// the lease up when it stops.
func TestSchedulerCommandLeadsAndResigns(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	keys := redisq.NewKeys("{test}:")
	rdb.Set(t.Context(), keys.Backend("1"), "", time.Minute) // one live backend, as usher backend registers
	rdb.SAdd(t.Context(), keys.BackendSet(), "1")
	ctx, cancel := context.WithCancel(t.Context())
	root := newRootCommand()
	stderr := &testbin.LogBuffer{}
	root.SetErr(stderr)
	root.SetArgs([]string{"scheduler", "--redis", srv.URL(), "--redis-prefix", "{test}:", "--node", "n1", "--slow-limit", "1",
		"--listen", "127.0.0.1:0", "--admin-token", "usher_cmd-test-admin-token"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Get(t.Context(), keys.Leader()).Val() != "1:n1" {
		if time.Now().After(deadline) {
			t.Fatalf("no lease within 10 s; log:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	m := regexp.MustCompile(`/v1 listening.* addr=(\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no listen address in the log:\n%s", stderr.String())
	}
	for _, want := range []string{"usher_scheduler_leading 1", `usher_asy_tier_limit{tier="fast"} 1`, `usher_asy_tier_limit{tier="slow"} 1`, "usher_jobs_agents 0", "go_goroutines"} {
		for metrics := scrape(t, "http://"+m[1]+"/metrics"); !strings.Contains(metrics, "\n"+want); metrics = scrape(t, "http://"+m[1]+"/metrics") {
			if time.Now().After(deadline) {
				t.Fatalf("/metrics has no %q:\n%s", want, metrics)
			}
			time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(t.Context(), keys.Leader()).Val(); n != 0 {
		t.Fatal("the lease outlived the scheduler")
	}
	if !strings.Contains(stderr.String(), "leading") {
		t.Fatalf("log:\n%s", stderr.String())
	}
}

// scrape reads a /metrics page.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestSchedulerCommandNeedsRedis(t *testing.T) {
	_, _, err := runCLI(t, "", "scheduler")
	if err == nil || !strings.Contains(err.Error(), "--redis is required") {
		t.Fatalf("error %v", err)
	}
}
