package jobsapi_test

import (
	"encoding/json"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/jobtype"
)

// A job keeps its tags and metadata; bad ones are refused, naming the
// field, and create nothing.
func TestTagsAndMetadata(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	id := enqueue(t, s, map[string]any{"queue": "q", "tags": []string{"nightly", "eu", "nightly"},
		"metadata": map[string]any{"owner": "ana", "html": "<b>x</b>"}})[0]
	j := mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+id, nil, 200)
	var meta map[string]string
	if err := json.Unmarshal(j.Metadata, &meta); err != nil || !slices.Equal(j.Tags, []string{"nightly", "eu"}) ||
		meta["owner"] != "ana" || meta["html"] != "<b>x</b>" {
		t.Fatalf("job = tags %q, metadata %s; want the tags once each and the metadata", j.Tags, j.Metadata)
	}
	many := make([]string, jobtype.MaxTags+1)
	for i := range many {
		many[i] = "t" + string(rune('a'+i))
	}
	for _, tc := range []struct {
		spec  map[string]any
		field string
	}{
		{map[string]any{"queue": "q", "tags": many}, "jobs[0].tags"},
		{map[string]any{"queue": "q", "tags": []string{"two words"}}, "jobs[0].tags[0]"},
		{map[string]any{"queue": "q", "tags": []string{"ok", "bell\a"}}, "jobs[0].tags[1]"},
		{map[string]any{"queue": "q", "tags": []string{""}}, "jobs[0].tags[0]"},
		{map[string]any{"queue": "q", "tags": []string{strings.Repeat("x", jobtype.MaxTagBytes+1)}}, "jobs[0].tags[0]"},
		{map[string]any{"queue": "q", "metadata": []int{1}}, "jobs[0].metadata"},
		{map[string]any{"queue": "q", "metadata": "text"}, "jobs[0].metadata"},
		{map[string]any{"queue": "q", "metadata": map[string]string{"x": strings.Repeat("y", jobtype.MaxMetadataBytes)}}, "jobs[0].metadata"},
	} {
		status, body := call(t, s, s.AdminToken, "POST", "/v1/jobs", map[string]any{"jobs": []any{tc.spec}})
		if msg, _ := body["error"].(string); status != 400 || !strings.HasPrefix(msg, tc.field+": ") {
			t.Errorf("enqueue %v = %d %v; want 400 naming %s", tc.spec, status, body, tc.field)
		}
	}
	if page := mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs", nil, 200); len(page.Jobs) != 1 {
		t.Fatalf("%d jobs after the refusals; want 1", len(page.Jobs))
	}
}

// GET /v1/jobs finds jobs by tag, key, text and time, newest first when
// asked; search text is data: quotes, wildcards and SQL or Redis
// metacharacters find only the tags that hold them.
func TestFindingJobs(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	tags := []string{"a%", "a_b", `x'y`, "*", `"q"`, "abc", "ab", "';DROP--"}
	ids := map[string]string{}
	for _, tag := range tags {
		ids[tag] = enqueue(t, s, map[string]any{"queue": "q", "tags": []string{tag}, "keys": []string{"net:" + tag}})[0]
	}
	list := func(query url.Values) []string {
		t.Helper()
		page := mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs?"+query.Encode(), nil, 200)
		var got []string
		for _, j := range page.Jobs {
			got = append(got, j.Tags[0])
		}
		return got
	}
	for _, tc := range []struct {
		query url.Values
		want  []string
	}{
		{url.Values{"tag": {"a%"}}, []string{"a%"}},
		{url.Values{"tag": {"*"}}, []string{"*"}},
		{url.Values{"tag": {"a"}}, nil},
		{url.Values{"key": {"net:x'y"}}, []string{`x'y`}},
		{url.Values{"key": {"net:*"}}, []string{"*"}},
		{url.Values{"q": {"a"}}, []string{"a%", "a_b", "abc", "ab"}},
		{url.Values{"q": {"a%"}}, []string{"a%"}},
		{url.Values{"q": {"a_"}}, []string{"a_b"}},
		{url.Values{"q": {"x'"}}, []string{`x'y`}},
		{url.Values{"q": {`"`}}, []string{`"q"`}},
		{url.Values{"q": {"'"}}, []string{"';DROP--"}},
		{url.Values{"q": {"%"}}, nil},
		{url.Values{"q": {ids["abc"]}}, []string{"abc"}},
		{url.Values{"q": {"a"}, "order": {"desc"}}, []string{"ab", "abc", "a_b", "a%"}},
		{url.Values{"to": {time.Now().Add(-time.Hour).Format(time.RFC3339)}}, nil},
		{url.Values{"from": {time.Now().Add(-time.Hour).Format(time.RFC3339)}, "tag": {"ab"}}, []string{"ab"}},
	} {
		if got := list(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("GET /v1/jobs?%s = tags %q; want %q", tc.query.Encode(), got, tc.want)
		}
	}
	for _, q := range []string{"order=sideways", "from=yesterday", "after=x", "limit=0", "state=lost", "q=" + strings.Repeat("x", 300)} {
		if status, _ := call(t, s, s.AdminToken, "GET", "/v1/jobs?"+q, nil); status != 400 {
			t.Errorf("GET /v1/jobs?%.40s = %d; want 400", q, status)
		}
	}
	// Pages newest first follow their cursor to the oldest job.
	var seen []string
	for after := ""; ; {
		page := mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs?order=desc&limit=3&after="+after, nil, 200)
		for _, j := range page.Jobs {
			seen = append(seen, j.ID)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	if len(seen) != len(tags) || seen[0] != ids["';DROP--"] || seen[len(seen)-1] != ids["a%"] {
		t.Fatalf("newest first in pages of 3: %v", seen)
	}
}

// DELETE /v1/jobs/{id} deletes a finished or waiting job, not a running
// one.
func TestDeleteJob(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	ids := enqueue(t, s, map[string]any{"queue": "q"}, map[string]any{"queue": "q"}, map[string]any{"queue": "q"})
	running := lease(t, s, "a", nil, 1, 1)
	if len(running) != 1 || running[0].ID != ids[0] {
		t.Fatalf("leased %v; want job %s", running, ids[0])
	}
	if status, body := call(t, s, s.AdminToken, "DELETE", "/v1/jobs/"+ids[0], nil); status != 409 || !strings.Contains(body["error"].(string), "running") {
		t.Fatalf("delete of a running job = %d %v; want 409 saying it runs", status, body)
	}
	complete(t, s, "a", 0, running...)
	for _, id := range ids[:2] { // finished, then queued
		if status, _ := send(t, s, s.AdminToken, "DELETE", "/v1/jobs/"+id, nil); status != 204 {
			t.Fatalf("delete of job %s = %d; want 204", id, status)
		}
		if status, _ := call(t, s, s.AdminToken, "GET", "/v1/jobs/"+id, nil); status != 404 {
			t.Fatalf("job %s after its delete = %d; want 404", id, status)
		}
	}
	if status, _ := call(t, s, s.AdminToken, "DELETE", "/v1/jobs/"+ids[0], nil); status != 404 {
		t.Fatalf("a second delete = %d; want 404", status)
	}
	if got := lease(t, s, "a", nil, 5, 5); len(got) != 1 || got[0].ID != ids[2] {
		t.Fatalf("after the deletes, leased %v; want only job %s", got, ids[2])
	}
}

// A bulk action over a filter goes batch by batch along its cursor and
// changes every job the filter selects, and no other; one over ids says
// which it could not change and why.
func TestBulkActions(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q", "retry": map[string]any{"maxAttempts": 1}})
	queue(t, s, map[string]any{"name": "other", "retry": map[string]any{"maxAttempts": 1}})
	var specs []map[string]any
	for range 7 {
		specs = append(specs, map[string]any{"queue": "q"})
	}
	failed := enqueue(t, s, specs...)
	complete(t, s, "a", 1, lease(t, s, "a", nil, 10, 10)...)
	other := enqueue(t, s, map[string]any{"queue": "other"})[0]
	complete(t, s, "a", 1, lease(t, s, "a", nil, 1, 1)...)
	since := time.Now().Add(-time.Minute).Format(time.RFC3339)
	total, batches := 0, 0
	for after := ""; ; batches++ {
		ans := mustAs[jobtype.ActionAnswer](t, s, "POST", "/v1/jobs/actions", map[string]any{"action": "retry",
			"filter": map[string]any{"queue": "q", "state": "failed", "from": since}, "limit": 3, "after": after}, 200)
		if ans.Matched > 3 || ans.Changed != ans.Matched || len(ans.Errors) != 0 {
			t.Fatalf("batch %d = %+v; want at most 3 jobs, each changed", batches, ans)
		}
		total += ans.Changed
		if after = ans.Next; after == "" {
			break
		}
	}
	if total != len(failed) || batches < 2 {
		t.Fatalf("retried %d jobs in %d batches; want %d in 3", total, batches+1, len(failed))
	}
	for _, id := range failed {
		if st := jobState(t, s, id); st != "queued" {
			t.Errorf("job %s is %s after the retry; want queued", id, st)
		}
	}
	if st := jobState(t, s, other); st != "failed" {
		t.Errorf("job %s of another queue is %s; want failed, untouched", other, st)
	}
	ans := mustAs[jobtype.ActionAnswer](t, s, "POST", "/v1/jobs/actions",
		map[string]any{"action": "cancel", "ids": []string{failed[0], "999", other}}, 200)
	if ans.Matched != 3 || ans.Changed != 1 || len(ans.Errors) != 2 || ans.Errors[0].ID != "999" || ans.Errors[1].ID != other {
		t.Fatalf("cancel of a queued, a missing and a failed job = %+v", ans)
	}
	for _, body := range []map[string]any{
		{"action": "explode", "ids": []string{failed[1]}},
		{"action": "retry"},
		{"action": "retry", "ids": []string{"1"}, "filter": map[string]any{}},
		{"action": "retry", "filter": map[string]any{"queue": "q"}, "limit": 5000},
		{"action": "retry", "filter": map[string]any{"q": strings.Repeat("x", 300)}},
	} {
		if status, _ := call(t, s, s.AdminToken, "POST", "/v1/jobs/actions", body); status != 400 {
			t.Errorf("actions %v = %d; want 400", body, status)
		}
	}
}

// GET /v1/whoami answers the caller's own token, without its secret, for
// each role; no token is a 401.
func TestWhoami(t *testing.T) {
	s := jobsapitest.Start(t)
	for _, role := range []string{"admin", "client", "agent"} {
		tok := must(t, s, "POST", "/v1/tokens", map[string]any{"name": "me-" + role, "role": role}, 201)["token"].(string)
		status, body := call(t, s, tok, "GET", "/v1/whoami", nil)
		if status != 200 || body["name"] != "me-"+role || body["role"] != role || body["token"] != nil {
			t.Errorf("whoami as %s = %d %v", role, status, body)
		}
	}
	if status, _ := call(t, s, "", "GET", "/v1/whoami", nil); status != 401 {
		t.Errorf("whoami without a token = %d; want 401", status)
	}
}

// A traceparent that does not parse is dropped with a warning, never
// stored or handed to an agent; a good one is kept.
func TestBadTraceparentIsIgnored(t *testing.T) {
	var logs testbin.LogBuffer
	s := jobsapitest.StartWith(t, jobsapitest.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	queue(t, s, map[string]any{"name": "q"})
	good := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tp := range []string{"garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01", "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", `00-"><script>`} {
		id := enqueue(t, s, map[string]any{"queue": "q", "traceparent": tp})[0]
		if j := mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+id, nil, 200); j.Traceparent != "" {
			t.Errorf("traceparent %q was kept as %q", tp, j.Traceparent)
		}
	}
	if n := strings.Count(logs.String(), "ignoring a job's traceparent that does not parse"); n != 4 {
		t.Errorf("%d warnings for 4 bad traceparents; log:\n%s", n, logs.String())
	}
	id := enqueue(t, s, map[string]any{"queue": "q", "traceparent": good})[0]
	leased := mustAs[jobtype.LeaseAnswer](t, s, "POST", "/v1/agent/lease", map[string]any{"agent": "a", "slots": 10, "max": 10}, 200)
	for _, j := range leased.Jobs {
		if want := map[bool]string{true: good}[j.ID == id]; j.Traceparent != want {
			t.Errorf("leased job %s carries %q; want %q", j.ID, j.Traceparent, want)
		}
	}
}

// A job's page shows its earlier attempts: one that failed and was
// retried, with its agent and error; the listing leaves them out.
func TestAttemptHistoryOnTheJob(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q", "retry": map[string]any{"maxAttempts": 3, "backoffMs": 1}})
	id := enqueue(t, s, map[string]any{"queue": "q"})[0]
	must(t, s, "POST", "/v1/agent/complete", map[string]any{"agent": "first", "results": []any{
		map[string]any{"id": lease(t, s, "first", nil, 1, 1)[0].ID, "attempt": 1, "exitCode": 2, "error": "disk full", "output": "<b>log</b>"}}}, 200)
	var second []leasedJob
	testwait.Eventually(t, 10*time.Second, func() bool {
		second = lease(t, s, "second", nil, 1, 1)
		return len(second) == 1
	}, "the retry leased")
	complete(t, s, "second", 0, second...)
	j := mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+id, nil, 200)
	if j.State != jobtype.StateSucceeded || len(j.Attempts) != 1 {
		t.Fatalf("job = %s with history %+v; want succeeded after one failed attempt", j.State, j.Attempts)
	}
	if a := j.Attempts[0]; a.Attempt != 1 || a.Agent != "first" || a.Error != "disk full" || a.Output != "<b>log</b>" || a.ExitCode == nil || *a.ExitCode != 2 {
		t.Errorf("the failed attempt = %+v", a)
	}
	if page := mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs", nil, 200); len(page.Jobs) != 1 || page.Jobs[0].Attempts != nil {
		t.Errorf("the listing = %+v; want the job without its history", page.Jobs)
	}
}
