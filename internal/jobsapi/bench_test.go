package jobsapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
)

// post sends a JSON body and decodes the answer into out.
func post(b *testing.B, c *http.Client, s *jobsapitest.Server, path string, body, out any) {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.URL+path, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b.Fatalf("%s: %d", path, resp.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkThroughput enqueues b.N no-op jobs in batches of 1000 and then
// has agents lease and complete them in batches: the durable path of
// generic jobs through real HTTP and SQLite. It reports enqueue and
// processing rates.
func BenchmarkThroughput(b *testing.B) { throughput(b, false) }

// BenchmarkThroughputWithKeys is BenchmarkThroughput with an idempotency
// key on every job, as the Go client sends them: the cost of keeping the
// keys, in memory and in the store.
func BenchmarkThroughputWithKeys(b *testing.B) { throughput(b, true) }

func throughput(b *testing.B, keyed bool) {
	s := jobsapitest.Start(b)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post(b, c, s, "/v1/queues", map[string]any{"name": "q"}, nil)
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		n := min(1000, b.N-done)
		jobs := make([]map[string]any, n)
		for i := range jobs {
			jobs[i] = map[string]any{"queue": "q", "payload": i}
			if keyed {
				jobs[i]["idempotencyKey"] = fmt.Sprintf("%032x", done+i)
			}
		}
		post(b, c, s, "/v1/jobs", map[string]any{"jobs": jobs}, nil)
		done += n
	}
	enq := time.Since(start)
	start = time.Now()
	const agents = 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	left := b.N
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("agent-%d", a)
			for {
				var ans struct {
					Jobs []struct {
						ID      string `json:"id"`
						Attempt int    `json:"attempt"`
					} `json:"jobs"`
				}
				post(b, c, s, "/v1/agent/lease", map[string]any{"agent": name, "slots": 500}, &ans)
				if len(ans.Jobs) == 0 {
					mu.Lock()
					l := left
					mu.Unlock()
					if l == 0 {
						return
					}
					continue
				}
				results := make([]map[string]any, len(ans.Jobs))
				for i, j := range ans.Jobs {
					results[i] = map[string]any{"id": j.ID, "attempt": j.Attempt, "exitCode": 0}
				}
				post(b, c, s, "/v1/agent/complete", map[string]any{"agent": name, "results": results}, nil)
				mu.Lock()
				left -= len(ans.Jobs)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	proc := time.Since(start)
	b.ReportMetric(float64(b.N)/enq.Seconds(), "enqueued/s")
	b.ReportMetric(float64(b.N)/proc.Seconds(), "processed/s")
}

// BenchmarkPickup measures one job's trip on an idle server: from the
// start of its enqueue to the waiting agent's lease answer.
func BenchmarkPickup(b *testing.B) {
	s := jobsapitest.Start(b)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	post(b, c, s, "/v1/queues", map[string]any{"name": "q"}, nil)
	lats := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		got := make(chan time.Time, 1)
		go func() {
			var ans struct{ Jobs []json.RawMessage }
			for len(ans.Jobs) == 0 {
				post(b, c, s, "/v1/agent/lease", map[string]any{"agent": "a", "slots": 1, "waitMs": 10000}, &ans)
			}
			got <- time.Now()
		}()
		waitWaiting(b, s)
		start := time.Now()
		var ids struct{ IDs []string }
		post(b, c, s, "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q"}}}, &ids)
		lats = append(lats, testwait.Receive(b, 10*time.Second, got, "the waiting agent's lease answer").Sub(start))
		post(b, c, s, "/v1/agent/complete", map[string]any{"agent": "a", "results": []any{map[string]any{"id": ids.IDs[0], "attempt": 1}}}, nil)
	}
	b.StopTimer()
	slices.Sort(lats)
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(lats[len(lats)*9/10].Microseconds())/1000, "ms-p90")
}

// waitWaiting returns once an agent's lease request is waiting for work.
func waitWaiting(b *testing.B, s *jobsapitest.Server) {
	b.Helper()
	testwait.Eventually(b, 10*time.Second, func() bool { return s.Engine.Waiting() > 0 }, "an agent's lease request waiting for work")
}
