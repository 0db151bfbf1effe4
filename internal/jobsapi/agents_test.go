package jobsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
)

// execution is one run of a job as the agent that ran it timed it: it
// asked for work at asked, got the job and started it at start.
type execution struct {
	job               leasedJob
	agent             string
	asked, start, end time.Time
}

// runAgents starts n agents of the given slots that long-poll for work
// and run each job with handler; it returns a function that stops them
// and returns every execution whose completion was accepted.
func runAgents(t *testing.T, s *jobsapitest.Server, n, slots int, handler func(leasedJob) (int, string)) func() []execution {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu    sync.Mutex
		execs []execution
		wg    sync.WaitGroup
	)
	for a := range n {
		name := fmt.Sprintf("agent-%d", a)
		for slot := range slots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					var ans struct{ Jobs []leasedJob }
					asked := time.Now()
					if err := postJSON(ctx, s, "/v1/agent/lease", map[string]any{"agent": name, "slots": slots, "max": 1, "waitMs": 200}, &ans); err != nil {
						if ctx.Err() == nil {
							t.Errorf("%s/%d lease: %v", name, slot, err)
						}
						return
					}
					for _, j := range ans.Jobs {
						e := execution{job: j, agent: name, asked: asked, start: time.Now()}
						code, out := handler(j)
						e.end = time.Now()
						var acks struct{ Acks []struct{ Ignored bool } }
						res := map[string]any{"id": j.ID, "attempt": j.Attempt, "exitCode": code, "output": out}
						if err := postJSON(context.Background(), s, "/v1/agent/complete", map[string]any{"agent": name, "results": []any{res}}, &acks); err != nil {
							t.Errorf("%s complete: %v", name, err)
							return
						}
						if len(acks.Acks) == 1 && !acks.Acks[0].Ignored {
							mu.Lock()
							execs = append(execs, e)
							mu.Unlock()
						}
					}
				}
			}()
		}
	}
	return func() []execution {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return execs
	}
}

func postJSON(ctx context.Context, s *jobsapitest.Server, path string, body, out any) error {
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", s.URL+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: status %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// finished says whether every given job reached a final state.
func finished(t *testing.T, s *jobsapitest.Server, ids []string) bool {
	for _, id := range ids {
		switch jobState(t, s, id) {
		case "succeeded", "failed", "cancelled":
		default:
			return false
		}
	}
	return true
}
