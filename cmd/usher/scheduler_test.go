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
	"github.com/usherhq/usher/internal/testwait"
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
	testwait.Eventually(t, time.Until(deadline), func() bool { return rdb.Get(t.Context(), keys.Leader()).Val() == "1:n1" },
		"the scheduler holding the lease; log:\n%s", stderr)
	m := regexp.MustCompile(`/v1 listening.* addr=(\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no listen address in the log:\n%s", stderr.String())
	}
	for _, want := range []string{"usher_scheduler_leading 1", `usher_asy_tier_limit{tier="fast"} 1`, `usher_asy_tier_limit{tier="slow"} 1`, "usher_jobs_agents 0", "go_goroutines"} {
		var metrics string
		shows := func() bool {
			metrics = scrape(t, "http://"+m[1]+"/metrics")
			return strings.Contains(metrics, "\n"+want)
		}
		if err := testwait.Until(time.Until(deadline), shows, "/metrics showing %q", want); err != nil {
			t.Fatalf("%v:\n%s", err, metrics)
		}
	}
	cancel()
	if err := testwait.Receive(t, 30*time.Second, done, "the scheduler command's return after its context ended"); err != nil {
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
