package jobsapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/jobtype"
)

// A periodic job over the API: created, listed, read, paused, resumed and
// removed; the server's clock loop wakes at its ticks and each tick makes
// one job from the template.
func TestCronLifecycle(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	c := mustAs[jobtype.Cron](t, s, "POST", "/v1/cron", map[string]any{"name": "beat", "spec": "@every 1s",
		"queue": "q", "job": map[string]any{"payload": map[string]any{"n": 1}, "priority": 4, "keys": []string{"k"}}}, 201)
	if c.Name != "beat" || c.Queue != "q" || c.Job.Queue != "q" || c.Timezone != "UTC" || c.Paused || c.NextAt == nil || c.LastAt != nil {
		t.Fatalf("created %+v", c)
	}
	var page jobtype.JobPage
	testwait.Eventually(t, 10*time.Second, func() bool {
		page = mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs?queue=q", nil, 200)
		return len(page.Jobs) >= 1
	}, "no job from the periodic job")
	j := page.Jobs[0]
	if string(j.Payload) != `{"n":1}` || j.Priority != 4 || len(j.Keys) != 1 {
		t.Fatalf("the tick's job is %+v; want the template", j)
	}
	got := mustAs[jobtype.Cron](t, s, "GET", "/v1/cron/beat", nil, 200)
	if got.LastAt == nil || got.NextAt == nil || !got.NextAt.After(*got.LastAt) {
		t.Fatalf("after a tick: %+v", got)
	}
	if list := mustAs[jobtype.CronList](t, s, "GET", "/v1/cron", nil, 200); len(list.Crons) != 1 || list.Crons[0].Name != "beat" {
		t.Fatalf("list %+v", list)
	}
	paused := mustAs[jobtype.Cron](t, s, "PATCH", "/v1/cron/beat", map[string]any{"paused": true}, 200)
	if !paused.Paused || paused.NextAt != nil {
		t.Fatalf("paused %+v; want paused with no nextAt", paused)
	}
	resumed := mustAs[jobtype.Cron](t, s, "PATCH", "/v1/cron/beat", map[string]any{"paused": false}, 200)
	if resumed.Paused || resumed.NextAt == nil {
		t.Fatalf("resumed %+v", resumed)
	}
	if status, _ := send(t, s, s.AdminToken, "DELETE", "/v1/cron/beat", nil); status != 204 {
		t.Fatalf("delete = %d; want 204", status)
	}
	if status, _ := send(t, s, s.AdminToken, "GET", "/v1/cron/beat", nil); status != 404 {
		t.Fatalf("get after delete = %d; want 404", status)
	}
}

// Every malformed periodic job gets a 4xx naming the field, with the
// parser's reason for a spec, and changes nothing.
func TestCronBadRequestsNameTheField(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	must(t, s, "POST", "/v1/cron", map[string]any{"name": "taken", "spec": "@daily", "queue": "q"}, 201)
	cron := func(extra map[string]any) map[string]any {
		c := map[string]any{"name": "c", "spec": "0 * * * *", "queue": "q"}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	cases := []struct {
		name    string
		body    map[string]any
		status  int
		mention string
	}{
		{"spec does not parse", cron(map[string]any{"spec": "61 * * * *"}), 400, "spec: \"61 * * * *\" does not parse: "},
		{"spec with six fields", cron(map[string]any{"spec": "0 0 * * * *"}), 400, "expected exactly 5 fields"},
		{"unknown descriptor", cron(map[string]any{"spec": "@fortnightly"}), 400, "spec:"},
		{"empty spec", cron(map[string]any{"spec": ""}), 400, "spec: required"},
		{"spec never fires", cron(map[string]any{"spec": "0 0 30 2 *"}), 400, "spec:"},
		{"time zone in the spec", cron(map[string]any{"spec": "TZ=UTC 0 * * * *"}), 400, "spec: give the time zone in the timezone field"},
		{"unknown time zone", cron(map[string]any{"timezone": "Mars/Olympus"}), 400, `timezone: unknown time zone "Mars/Olympus"`},
		{"bad name", cron(map[string]any{"name": "a b"}), 400, "name:"},
		{"duplicate name", cron(map[string]any{"name": "taken"}), 409, `name: periodic job "taken" exists`},
		{"missing queue", cron(map[string]any{"queue": ""}), 400, "queue: required"},
		{"unknown queue", cron(map[string]any{"queue": "nope"}), 400, `queue: unknown queue "nope"`},
		{"template in another queue", cron(map[string]any{"job": map[string]any{"queue": "other"}}), 400, "job.queue"},
		{"template with dependencies", cron(map[string]any{"job": map[string]any{"after": []string{"1"}}}), 400, "job.after"},
		{"template with unknown tier", cron(map[string]any{"job": map[string]any{"tier": "glacial"}}), 400, "job.tier"},
		{"template with bad mode", cron(map[string]any{"job": map[string]any{"mode": "append"}}), 400, "job.mode"},
		{"template with bad priority", cron(map[string]any{"job": map[string]any{"priority": 40000}}), 400, "job.priority"},
		{"template with empty key", cron(map[string]any{"job": map[string]any{"keys": []string{""}}}), 400, "job.keys[0]"},
		{"unknown field", cron(map[string]any{"every": "day"}), 400, "every: unknown field"},
	}
	before := mustAs[jobtype.CronList](t, s, "GET", "/v1/cron", nil, 200)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := call(t, s, s.AdminToken, "POST", "/v1/cron", c.body)
			msg, _ := out["error"].(string)
			if status != c.status || !strings.Contains(msg, c.mention) {
				t.Fatalf("POST /v1/cron %v = %d %q; want %d mentioning %q", c.body, status, msg, c.status, c.mention)
			}
		})
	}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/cron/none"}, {"PATCH", "/v1/cron/none"}, {"DELETE", "/v1/cron/none"}} {
		var body any
		if c.method == "PATCH" {
			body = map[string]any{"paused": true}
		}
		if status, out := call(t, s, s.AdminToken, c.method, c.path, body); status != 404 || !strings.Contains(out["error"].(string), `no periodic job "none"`) {
			t.Fatalf("%s %s = %d %v; want 404", c.method, c.path, status, out)
		}
	}
	if status, _ := call(t, s, s.AdminToken, "PATCH", "/v1/cron/taken", map[string]any{"paused": "yes"}); status != 400 {
		t.Fatalf("PATCH with a string = %d; want 400", status)
	}
	after := mustAs[jobtype.CronList](t, s, "GET", "/v1/cron", nil, 200)
	if len(after.Crons) != 1 || len(before.Crons) != 1 || after.Crons[0].Paused {
		t.Fatalf("bad requests changed the periodic jobs: %+v → %+v", before, after)
	}
}
