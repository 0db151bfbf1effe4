package jobsapi_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/jobtype"
)

// enqueueAnswer submits jobs and returns the whole answer.
func enqueueAnswer(t *testing.T, s *jobsapitest.Server, jobs ...map[string]any) jobtype.EnqueueAnswer {
	t.Helper()
	return mustAs[jobtype.EnqueueAnswer](t, s, "POST", "/v1/jobs", map[string]any{"jobs": jobs}, 201)
}

func jobCount(t *testing.T, s *jobsapitest.Server) int {
	t.Helper()
	return len(mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs?limit=1000", nil, 200).Jobs)
}

// An enqueue that repeats an idempotency key, in the same batch, in a
// later one, or after a restart, answers the first job's id marked
// existing and creates nothing; the answer leaves "existing" out when
// every job is new.
func TestIdempotencyKeyRepeatedGivesTheFirstJob(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usher.db")
	s := jobsapitest.StartAt(t, path, jobsapitest.Options{})
	queue(t, s, map[string]any{"name": "q"})
	_, raw := send(t, s, s.AdminToken, "POST", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q", "idempotencyKey": "order-17"}}})
	if strings.Contains(string(raw), "existing") {
		t.Fatalf("answer of new jobs = %s; want no existing field", raw)
	}
	ans := enqueueAnswer(t, s,
		map[string]any{"queue": "q", "idempotencyKey": "order-17"},
		map[string]any{"queue": "q", "idempotencyKey": "order-18"},
		map[string]any{"queue": "q", "idempotencyKey": "order-18"},
		map[string]any{"queue": "q"})
	if want := []string{"1", "2", "2", "3"}; !slices.Equal(ans.IDs, want) || !slices.Equal(ans.Existing, []bool{true, false, true, false}) {
		t.Fatalf("second batch = %v %v; want ids %v, existing [true false true false]", ans.IDs, ans.Existing, want)
	}
	if n := jobCount(t, s); n != 3 {
		t.Fatalf("%d jobs; want 3", n)
	}
	if j := mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/2", nil, 200); j.IdempotencyKey != "order-18" {
		t.Fatalf("job 2 = %+v; want its idempotency key shown", j)
	}

	copyPath := filepath.Join(t.TempDir(), "copy.db")
	copyDB(t, path, copyPath) // as a crash would leave it
	r := jobsapitest.StartAt(t, copyPath, jobsapitest.Options{})
	ans = enqueueAnswer(t, r, map[string]any{"queue": "q", "idempotencyKey": "order-18"}, map[string]any{"queue": "q", "idempotencyKey": "order-19"})
	if !slices.Equal(ans.IDs, []string{"2", "4"}) || !slices.Equal(ans.Existing, []bool{true, false}) {
		t.Fatalf("after a restart = %v %v; want [2 4] [true false]", ans.IDs, ans.Existing)
	}
}

// A unique job: while one alike (same queue, same payload up to key
// order and spacing) is unfinished, an enqueue answers it; once it
// finished, a new one is created; byPeriodMs and states narrow the match.
func TestUniqueJobs(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	queue(t, s, map[string]any{"name": "r"})
	byArgs := map[string]any{"byArgs": true}
	ans := enqueueAnswer(t, s,
		map[string]any{"queue": "q", "payload": map[string]any{"a": 1, "b": 2}, "unique": byArgs},
		map[string]any{"queue": "q", "payload": map[string]any{"b": 2, "a": 1}, "unique": byArgs},
		map[string]any{"queue": "q", "payload": map[string]any{"a": 2}, "unique": byArgs},
		map[string]any{"queue": "r", "payload": map[string]any{"a": 1, "b": 2}, "unique": byArgs},
		map[string]any{"queue": "q", "payload": map[string]any{"a": 1, "b": 2}})
	if !slices.Equal(ans.IDs, []string{"1", "1", "2", "3", "4"}) {
		t.Fatalf("ids = %v; want [1 1 2 3 4] (the second repeats the first)", ans.IDs)
	}
	ans = enqueueAnswer(t, s, map[string]any{"queue": "q", "payload": json.RawMessage(`{"b":2,  "a":1}`), "unique": byArgs},
		map[string]any{"queue": "r", "unique": map[string]any{}})
	if !slices.Equal(ans.IDs, []string{"1", "5"}) || !slices.Equal(ans.Existing, []bool{true, false}) {
		t.Fatalf("later batch = %v %v; want [1 5] [true false]", ans.IDs, ans.Existing)
	}
	// Not by args: any job of queue r unique by queue alone is the same.
	if ans = enqueueAnswer(t, s, map[string]any{"queue": "r", "payload": 9, "unique": map[string]any{}}); ans.IDs[0] != "5" {
		t.Fatalf("unique by queue alone = %v; want job 5", ans.IDs)
	}
	// Job 1 runs: with states [queued] it no longer counts. A lease takes
	// the jobs of one queue, so it may take queue r's first.
	var running []leasedJob
	for tries := 0; len(running) == 0 && tries < 3; tries++ {
		for _, j := range lease(t, s, "a", nil, 10, 10) {
			if j.ID == "1" {
				running = append(running, j)
			} else {
				complete(t, s, "a", 0, j)
			}
		}
	}
	if len(running) == 0 {
		t.Fatal("job 1 was not leased")
	}
	defer complete(t, s, "a", 0, running[0])
	queuedOnly := map[string]any{"byArgs": true, "states": []string{"queued"}}
	if ans = enqueueAnswer(t, s, map[string]any{"queue": "q", "payload": map[string]any{"a": 1, "b": 2}, "unique": queuedOnly}); ans.IDs[0] != "6" {
		t.Fatalf("with states [queued] while job 1 runs = %v; want a new job 6", ans.IDs)
	}
	// Job 2 finished: an enqueue alike creates a job again.
	if ans = enqueueAnswer(t, s, map[string]any{"queue": "q", "payload": map[string]any{"a": 2}, "unique": byArgs}); ans.IDs[0] != "7" || ans.Existing != nil {
		t.Fatalf("after job 2 finished = %v %v; want a new job 7", ans.IDs, ans.Existing)
	}
	// A period of a day: the same day's bucket.
	daily := map[string]any{"byArgs": true, "byPeriodMs": 86400000}
	a := enqueueAnswer(t, s, map[string]any{"queue": "r", "payload": "d", "unique": daily}, map[string]any{"queue": "r", "payload": "d", "unique": daily})
	if a.IDs[0] != a.IDs[1] {
		t.Fatalf("two enqueues in one period = %v; want one job", a.IDs)
	}
}

// Bad idempotency keys and unique options are refused with a 400 naming
// the field, and nothing is created.
func TestBadIdempotencyAndUniqueFields(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	enqueue(t, s, map[string]any{"queue": "q", "idempotencyKey": "taken"})
	job := func(extra map[string]any) map[string]any {
		j := map[string]any{"queue": "q"}
		for k, v := range extra {
			j[k] = v
		}
		return map[string]any{"jobs": []any{map[string]any{"queue": "q", "idempotencyKey": "new"}, j}}
	}
	cases := []struct {
		name    string
		body    any
		mention string
	}{
		{"empty key", job(map[string]any{"idempotencyKey": ""}), "jobs[1].idempotencyKey: empty"},
		{"empty key, raw", []byte(`{"jobs":[{"queue":"q"},{"queue":"q","idempotencyKey" : ""}]}`), "jobs[1].idempotencyKey: empty"},
		{"key too long", job(map[string]any{"idempotencyKey": strings.Repeat("k", 201)}), "jobs[1].idempotencyKey: 201 bytes, over the limit of 200"},
		{"key not a string", job(map[string]any{"idempotencyKey": 7}), "idempotencyKey"},
		{"unknown state", job(map[string]any{"unique": map[string]any{"states": []string{"queued", "paused"}}}), `jobs[1].unique.states[1]: "paused" is not an unfinished state`},
		{"final state", job(map[string]any{"unique": map[string]any{"states": []string{"succeeded"}}}), `jobs[1].unique.states[0]: "succeeded" is not an unfinished state`},
		{"negative period", job(map[string]any{"unique": map[string]any{"byPeriodMs": -5}}), "jobs[1].unique.byPeriodMs: -5 is negative"},
		{"unknown unique field", job(map[string]any{"unique": map[string]any{"byQueue": true}}), "byQueue"},
		{"key in a workflow", map[string]any{"jobs": []any{map[string]any{"name": "a", "queue": "q", "idempotencyKey": "w"}}}, "jobs[0].idempotencyKey: not supported in a workflow"},
		{"empty key in a workflow", map[string]any{"jobs": []any{map[string]any{"name": "a", "queue": "q"}, map[string]any{"name": "b", "queue": "q", "idempotencyKey": ""}}}, "jobs[1].idempotencyKey: not supported in a workflow"},
		{"unique in a workflow", map[string]any{"jobs": []any{map[string]any{"name": "a", "queue": "q", "unique": map[string]any{}}}}, "jobs[0].unique: not supported in a workflow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := "/v1/jobs"
			if strings.Contains(c.name, "workflow") {
				path = "/v1/workflows"
			}
			status, out := call(t, s, s.AdminToken, "POST", path, c.body)
			msg, _ := out["error"].(string)
			if status != 400 || !strings.Contains(msg, c.mention) {
				t.Fatalf("= %d %q; want 400 mentioning %q", status, msg, c.mention)
			}
		})
	}
	if n := jobCount(t, s); n != 1 {
		t.Fatalf("%d jobs after the refused requests; want 1", n)
	}
	// The key of a refused request was not kept.
	if ans := enqueueAnswer(t, s, map[string]any{"queue": "q", "idempotencyKey": "new"}); ans.Existing != nil {
		t.Fatalf("key of a refused batch = %v %v; want a new job", ans.IDs, ans.Existing)
	}
}

// keyedEnqueue posts jobs with the request's Idempotency-Key header
// values (none when keys is empty) and returns the status and answer.
func keyedEnqueue(t *testing.T, s *jobsapitest.Server, keys []string, jobs ...map[string]any) (int, []byte) {
	t.Helper()
	return sendHeader(t, s, s.AdminToken, "POST", "/v1/jobs", map[string]any{"jobs": jobs}, http.Header{jobtype.IdempotencyKeyHeader: keys})
}

// A request's own idempotency key (the Idempotency-Key header) stands for
// all its jobs: a repeat, also after a restart, answers the first
// request's ids, every one existing, even when some of them were jobs
// that existed before the first request; a repeat with another number of
// jobs is a conflict, and a bad header a 400; neither changes anything.
func TestRequestIdempotencyKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usher.db")
	s := jobsapitest.StartAt(t, path, jobsapitest.Options{})
	queue(t, s, map[string]any{"name": "q"})
	enqueue(t, s, map[string]any{"queue": "q", "idempotencyKey": "old"}) // job 1
	batch := []map[string]any{{"queue": "q"}, {"queue": "q", "idempotencyKey": "old"}, {"queue": "q"}, {"queue": "q"}}
	answer := func(s *jobsapitest.Server, keys []string, want int, jobs ...map[string]any) jobtype.EnqueueAnswer {
		t.Helper()
		status, raw := keyedEnqueue(t, s, keys, jobs...)
		if status != want {
			t.Fatalf("enqueue with %q = %d %s; want %d", keys, status, raw, want)
		}
		var ans jobtype.EnqueueAnswer
		_ = json.Unmarshal(raw, &ans)
		return ans
	}
	first := answer(s, []string{"batch-7"}, 201, batch...)
	if want := []string{"2", "1", "3", "4"}; !slices.Equal(first.IDs, want) || !slices.Equal(first.Existing, []bool{false, true, false, false}) {
		t.Fatalf("first request = %v %v; want %v with job 1 existing", first.IDs, first.Existing, want)
	}
	allExisting := []bool{true, true, true, true}
	if again := answer(s, []string{"batch-7"}, 201, batch...); !slices.Equal(again.IDs, first.IDs) || !slices.Equal(again.Existing, allExisting) {
		t.Fatalf("repeat = %v %v; want %v, all existing", again.IDs, again.Existing, first.IDs)
	}
	bad := []struct {
		name    string
		keys    []string
		jobs    []map[string]any
		status  int
		mention string
	}{
		{"other job count", []string{"batch-7"}, batch[:2], 409, "was used by an earlier request of 4 jobs; this one has 2"},
		{"empty", []string{""}, batch[:1], 400, "Idempotency-Key: empty"},
		{"twice", []string{"a", "b"}, batch[:1], 400, "Idempotency-Key: given more than once"},
		{"too long", []string{strings.Repeat("k", 201)}, batch[:1], 400, "Idempotency-Key: 201 bytes, over the limit of 200"},
	}
	for _, c := range bad {
		status, raw := keyedEnqueue(t, s, c.keys, c.jobs...)
		if status != c.status || !strings.Contains(string(raw), c.mention) {
			t.Errorf("%s: = %d %s; want %d mentioning %q", c.name, status, raw, c.status, c.mention)
		}
	}
	if n := jobCount(t, s); n != 4 {
		t.Fatalf("%d jobs; want 4", n)
	}

	copyPath := filepath.Join(t.TempDir(), "copy.db")
	copyDB(t, path, copyPath) // as a crash would leave it
	r := jobsapitest.StartAt(t, copyPath, jobsapitest.Options{})
	if again := answer(r, []string{"batch-7"}, 201, batch...); !slices.Equal(again.IDs, first.IDs) || !slices.Equal(again.Existing, allExisting) {
		t.Fatalf("repeat after a restart = %v %v; want %v, all existing", again.IDs, again.Existing, first.IDs)
	}
	if other := answer(r, []string{"batch-8"}, 201, batch[0]); !slices.Equal(other.IDs, []string{"5"}) {
		t.Fatalf("another key after a restart = %v; want a new job 5", other.IDs)
	}
}
