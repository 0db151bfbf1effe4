package jobsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/sqlitejobs"
	"github.com/usherhq/usher/jobtype"
)

// BenchmarkJobListFirstPage times the first page (100 jobs) of GET
// /v1/jobs through HTTP on a SQLite store holding n jobs: 95 % finished
// (1 % of all failed), spread over 10 queues, each with one of 1000 keys;
// one job in 1000 carries the tag "rare", every tenth the tag "nightly".
// It reports the server's time per page in ms (the loopback's share is
// tens of microseconds).
func BenchmarkJobListFirstPage(b *testing.B) {
	for _, n := range []int{100000, 1000000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "usher.db")
			fillJobs(b, path, n, 100)
			s := jobsapitest.StartAt(b, path, jobsapitest.Options{})
			for _, q := range []string{"", "order=desc", "queue=q3", "state=failed", "state=queued&order=desc",
				"tag=nightly", "tag=rare", "key=k:7", "q=ra", "q=999999", "queue=q1&state=failed&order=desc",
				"from=" + time.UnixMilli(1700000000000+int64(n)/2).UTC().Format(time.RFC3339)} {
				b.Run("query="+q, func(b *testing.B) {
					c := &http.Client{}
					for b.Loop() {
						page := getPage(b, c, s, "/v1/jobs?limit=100&"+q)
						if len(page.Jobs) == 0 && page.Next == "" {
							b.Fatalf("%s: no jobs", q)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
				})
			}
		})
	}
}

func getPage(b *testing.B, c *http.Client, s *jobsapitest.Server, path string) jobtype.JobPage {
	var page jobtype.JobPage
	req, _ := http.NewRequest("GET", s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("%s: %d", path, resp.StatusCode)
	}
	if err := jsonDecode(resp, &page); err != nil {
		b.Fatal(err)
	}
	return page
}

// fillJobs writes n jobs into a new SQLite file through the store, as
// the engine would have: inserts, starts and finishes; one finished job
// in failEvery failed.
func fillJobs(b *testing.B, path string, n, failEvery int) {
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	store, err := sqlitejobs.Open(ctx, db, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	at := time.UnixMilli(1700000000000)
	var queues []jobs.Op
	for i := range 10 {
		queues = append(queues, jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: fmt.Sprintf("q%d", i)}})
	}
	pending := store.Append(queues...)
	for first := 1; first <= n; first += 10000 {
		var ops []jobs.Op
		for id := int64(first); id < int64(min(first+10000, n+1)); id++ {
			spec := jobtype.JobSpec{Queue: fmt.Sprintf("q%d", id%10), Tier: "fast", TimeoutMs: 60000,
				Keys: []string{fmt.Sprintf("k:%d", id%1000)}}
			if id%10 == 0 {
				spec.Tags = append(spec.Tags, "nightly")
			}
			if id%1000 == 0 {
				spec.Tags = append(spec.Tags, "rare")
			}
			created := at.Add(time.Duration(id) * time.Millisecond)
			ops = append(ops, jobs.Op{Kind: jobs.OpInsert, Record: &jobs.Record{ID: id, Spec: spec, CreatedAt: created}})
			if id%20 == 0 {
				continue // 5 % unfinished
			}
			state := jobtype.StateSucceeded
			if id%int64(failEvery) == 1%int64(failEvery) {
				state = jobtype.StateFailed
			}
			ops = append(ops, jobs.Op{Kind: jobs.OpStart, ID: id, Attempt: 1, Agent: "a", At: created},
				jobs.Op{Kind: jobs.OpFinish, ID: id, State: state, At: created})
		}
		pending = store.Append(ops...)
	}
	if err := pending.Wait(ctx); err != nil {
		b.Fatal(err)
	}
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// BenchmarkBulkRetry retries every failed job of a SQLite store holding
// n jobs, all finished and failed, through POST /v1/jobs/actions batch
// after batch along the cursor, as the CLI and the job browser do. It
// reports the jobs retried per second and the time per batch.
func BenchmarkBulkRetry(b *testing.B) {
	for _, n := range []int{100000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				path := filepath.Join(b.TempDir(), "usher.db")
				fillJobs(b, path, n, 1)
				s := jobsapitest.StartAt(b, path, jobsapitest.Options{})
				c := &http.Client{}
				b.StartTimer()
				start, batches, changed := time.Now(), 0, 0
				for after := ""; ; batches++ {
					var ans jobtype.ActionAnswer
					post(b, c, s, "/v1/jobs/actions", map[string]any{"action": "retry",
						"filter": map[string]any{"state": "failed"}, "limit": 1000, "after": after}, &ans)
					changed += ans.Changed
					if after = ans.Next; after == "" {
						break
					}
				}
				took := time.Since(start)
				if changed != n-n/20 {
					b.Fatalf("retried %d jobs; want %d", changed, n-n/20)
				}
				b.ReportMetric(float64(changed)/took.Seconds(), "jobs/s")
				b.ReportMetric(float64(took.Milliseconds())/float64(batches+1), "ms/batch")
			}
		})
	}
}
