package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/resultcache"
	"github.com/usherhq/usher/internal/shares"
	"github.com/usherhq/usher/internal/testclock"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/internal/uploads"
)

// queueServersOn starts n queue servers of multi-node mode on one real
// redis-server, as behind a load balancer, each with its own data file.
func queueServersOn(t *testing.T, n int, mutate func(*Config)) []*testService {
	t.Helper()
	url := redistest.Start(t).URL()
	var out []*testService
	for i := range n {
		out = append(out, startService(t, 0, func(c *Config) {
			c.Redis = RedisConfig{URL: url, Node: fmt.Sprintf("front-%d", i+1)}
			if mutate != nil {
				mutate(c)
			}
		}))
	}
	return out
}

// metricsText is the service's /metrics, read from the operator views as
// --admin-listen serves them.
func metricsText(t *testing.T, ts *testService) string {
	t.Helper()
	admin := httptest.NewServer(ts.adminRoutes())
	defer admin.Close()
	resp, err := http.Get(admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// deleteShare calls DELETE /api/shares/{id} on the operator views as
// --admin-listen serves them (the admin token guards the same route on
// the public listener).
func deleteShare(t *testing.T, ts *testService, id string) (int, string) {
	t.Helper()
	admin := httptest.NewServer(ts.adminRoutes())
	defer admin.Close()
	req, _ := http.NewRequest("DELETE", admin.URL+"/api/shares/"+id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Each mode's share statuses: made, opened from another queue server (in
// multi-node mode), expired after the retention (410), refused at the
// quota (507), deleted by the operator (410).
func TestShareStatusesInBothModes(t *testing.T) {
	modes := []struct {
		name  string
		start func(t *testing.T, mutate func(*Config)) (a, b *testService)
	}{
		{"embedded", func(t *testing.T, mutate func(*Config)) (a, b *testService) {
			ts := startService(t, 0, mutate)
			return ts, ts
		}},
		{"redis", func(t *testing.T, mutate func(*Config)) (a, b *testService) {
			fronts := queueServersOn(t, 2, mutate)
			return fronts[0], fronts[1]
		}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			clock := testclock.New(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
			const quota = 140 // two of these shares (67 and 68 bytes stored), not three
			a, b := m.start(t, func(c *Config) {
				c.now, c.ShareRetention, c.ShareQuota = clock.Now, 7*24*time.Hour, quota
			})
			status, made := call(t, a, "POST", "/api/shares", shareBody("main.asy"))
			id, _ := made["id"].(string)
			if status != http.StatusCreated {
				t.Fatalf("POST on A: %d %v", status, made)
			}
			if status, got := call(t, b, "GET", "/api/shares/"+id, ""); status != http.StatusOK || len(got["files"].([]any)) != 1 {
				t.Fatalf("GET on B of a share made on A: %d %v", status, got)
			}
			status, other := call(t, b, "POST", "/api/shares", shareBody("other.asy"))
			if status != http.StatusCreated {
				t.Fatalf("second share: %d %v", status, other)
			}
			metrics := metricsText(t, b)
			for _, line := range []string{"usher_shares 2\n", "usher_shares_bytes 135\n", "usher_shares_quota_bytes 140\n"} {
				if !strings.Contains(metrics, line) {
					t.Fatalf("/metrics on B lacks %q:\n%s", line, metrics)
				}
			}
			status, full := call(t, a, "POST", "/api/shares", shareBody("third.asy"))
			if status != http.StatusInsufficientStorage || !strings.Contains(fmt.Sprint(full["error"]), "shares are full") {
				t.Fatalf("POST beyond the quota: %d %v, want 507", status, full)
			}
			clock.Advance(6 * 24 * time.Hour)
			if status, _ := call(t, a, "GET", "/api/shares/"+id, ""); status != http.StatusOK {
				t.Fatalf("GET within the retention: %d", status)
			}
			clock.Advance(2 * 24 * time.Hour) // the other share was last opened 8 days ago
			status, gone := call(t, b, "GET", "/api/shares/"+other["id"].(string), "")
			if status != http.StatusGone || !strings.Contains(fmt.Sprint(gone["error"]), "not opened for 7 days") {
				t.Fatalf("GET after the retention: %d %v, want 410 saying it expired", status, gone)
			}
			if status, body := deleteShare(t, a, id); status != http.StatusNoContent {
				t.Fatalf("DELETE: %d %s", status, body)
			}
			status, gone = call(t, b, "GET", "/api/shares/"+id, "")
			if status != http.StatusGone || !strings.Contains(fmt.Sprint(gone["error"]), "deleted by the operator") {
				t.Fatalf("GET after DELETE: %d %v, want 410", status, gone)
			}
			for _, tc := range []struct {
				id     string
				status int
			}{{id, http.StatusNotFound}, {strings.Repeat("A", 22), http.StatusNotFound}, {"nope", http.StatusBadRequest}} {
				if status, body := deleteShare(t, b, tc.id); status != tc.status || !strings.Contains(body, `"error"`) {
					t.Fatalf("DELETE %s: %d %s, want %d with an error", tc.id, status, body, tc.status)
				}
			}
		})
	}
}

// A file uploaded through queue server A is restored through queue
// server B: B queues the task with its bytes instead of asking for them.
func TestUploadOnOneQueueServerRestoresOnAnother(t *testing.T) {
	fronts := queueServersOn(t, 2, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	src := "draw(unitcircle); // uploaded through A\n"
	a := dial(t, fronts[0].srv)
	a.add("main.asy", src, true)
	a.send("run", nil)
	rdb, err := redisq.Open(context.Background(), fronts[0].cfg.Redis.URL, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	tasksWith := func(content string) int {
		n := 0
		keys, _ := rdb.Keys(context.Background(), redisq.DefaultPrefix+"task:*:files").Result()
		for _, k := range keys {
			if v, _ := rdb.HGet(context.Background(), k, "main.asy").Result(); v == content {
				n++
			}
		}
		return n
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return tasksWith(src) == 1 }, "A queued the uploaded task")

	miss := dial(t, fronts[1].srv) // the control: a file never uploaded is asked for
	miss.restore("main.asy", "never uploaded", true)
	miss.send("run", nil)
	if m, _ := miss.next(); m.verb != "missing" {
		t.Fatalf("restore of an unknown file: %s, want missing", m.verb)
	}

	b := dial(t, fronts[1].srv)
	b.restore("main.asy", src, true)
	b.send("run", nil)
	testwait.Eventually(t, 10*time.Second, func() bool { return tasksWith(src) == 2 }, "B queued the restored task with its bytes")
}

// Bad share requests to a queue server of multi-node mode get the same
// answers as in the embedded default and store nothing in Redis.
func TestShareRefusalsInRedisMode(t *testing.T) {
	ts := queueServersOn(t, 1, func(c *Config) { c.ShareBytes = 1000 })[0]
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"unknown share", "GET", "/api/shares/" + strings.Repeat("A", 22), "", 404, "no share"},
		{"malformed id", "GET", "/api/shares/nope", "", 400, `"id" "nope"`},
		{"id with dots", "GET", "/api/shares/..%2F..%2Fetc%2Fpasswd", "", 400, "is not a share id"},
		{"two mains", "POST", "/api/shares", `{"files":[{"filename":"a.asy","main":true},{"filename":"b.asy","main":true}]}`, 400, "exactly one file"},
		{"content too large", "POST", "/api/shares", `{"files":[{"filename":"a.asy","main":true,"content":"` + strings.Repeat("x", 1001) + `"}]}`, 413, "at most 1000"},
		{"body too large", "POST", "/api/shares", `{"files":[{"filename":"a.asy","main":true,"content":"` + strings.Repeat("x", 80<<10) + `"}]}`, 413, "too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, ts, tc.method, tc.path, tc.body)
			if status != tc.status || !strings.Contains(fmt.Sprint(body["error"]), tc.want) {
				t.Fatalf("%d %v, want %d with an error containing %q", status, body, tc.status, tc.want)
			}
		})
	}
	if n, bytes, err := ts.shares.Usage(context.Background()); err != nil || n != 0 || bytes != 0 {
		t.Fatalf("after refusals the shares hold %d shares, %d bytes (%v)", n, bytes, err)
	}
}

// On Redis Cluster every script of the shared stores runs: their keys
// share the prefix's hash tag, so no script crosses slots.
func TestSharedStoresOnRedisCluster(t *testing.T) {
	ctx := context.Background()
	cluster := redistest.StartCluster(t, 3)
	cfg := Config{Redis: RedisConfig{URL: cluster.URL(), Prefix: redisq.DefaultPrefix}, CacheBytes: 1 << 20, UploadBytes: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	m, err := openMultiNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.close)
	st, err := m.stores(ctx, nil, cfg, shares.Config{MaxFiles: 4, MaxBytes: 1 << 10, Quota: 1 << 20, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := st.shares.Put(ctx, []shares.File{{Filename: "main.asy", Main: true, Content: "dot((0,0));"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.shares.Get(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := st.shares.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.shares.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	entry := resultcache.Entry{Chunks: []resultcache.Chunk{{Kind: resultcache.Result, Label: "svg", Data: []byte("<svg/>")}}}
	if err := st.cache.Put(ctx, "k", entry); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.cache.Get(ctx, "k"); !ok || err != nil {
		t.Fatalf("cache Get on the cluster = %v, %v", ok, err)
	}
	data := []byte("draw(unitcircle);")
	if !st.uploads.Put(ctx, uploads.Hash(data), data) {
		t.Fatal("upload not kept on the cluster")
	}
	if _, ok := st.uploads.Get(ctx, uploads.Hash(data)); !ok {
		t.Fatal("upload not restored on the cluster")
	}
}
