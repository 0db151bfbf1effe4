package main

import (
	"strings"
	"testing"

	"github.com/usherhq/usher/client"
)

// Finding and steering jobs from the CLI: enqueue with --tag and
// --metadata, jobs ls by tag and search text, a bulk cancel over
// selecting flags with its progress, and jobs delete.
func TestCLIFindAndActOnJobs(t *testing.T) {
	srv, c := agentServer(t, "q")
	t.Setenv("USHER_SERVER", srv.URL)
	t.Setenv("USHER_TOKEN", srv.AdminToken)
	var ids []string
	for _, tag := range []string{"nightly", "nightly", "adhoc"} {
		out, _, err := runCLI(t, "", "enqueue", "q", "--tag", tag, "--tag", "eu", "--metadata", `{"owner":"ana"}`)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	j, err := c.Job(t.Context(), ids[0])
	if err != nil || strings.Join(j.Tags, ",") != "nightly,eu" || string(j.Metadata) != `{"owner":"ana"}` {
		t.Fatalf("job %s = tags %q, metadata %s, %v", ids[0], j.Tags, j.Metadata, err)
	}
	out, _, err := runCLI(t, "", "jobs", "ls", "--tag", "nightly", "--newest-first", "--since", "1h")
	if err != nil || strings.Index(out, "\n"+ids[1]+" ") > strings.Index(out, "\n"+ids[0]+" ") || strings.Contains(out, "\n"+ids[2]+" ") {
		t.Fatalf("jobs ls --tag nightly --newest-first: %q, %v; want jobs %s then %s", out, err, ids[1], ids[0])
	}
	out, stderr, err := runCLI(t, "", "jobs", "cancel", "--tag", "nightly", "--batch", "1")
	if err != nil || !strings.Contains(out, "cancel: 2 of 2 jobs") || !strings.Contains(stderr, "2 jobs matched, 2 changed so far") {
		t.Fatalf("jobs cancel --tag nightly: %q %q, %v", out, stderr, err)
	}
	if out, _, err := runCLI(t, "", "jobs", "delete", ids[0]); err != nil || !strings.Contains(out, "deleted jobs "+ids[0]) {
		t.Fatalf("jobs delete: %q, %v", out, err)
	}
	p, err := c.Jobs(t.Context(), client.JobFilter{Q: "night"})
	if err != nil || len(p.Jobs) != 1 || p.Jobs[0].ID != ids[1] || p.Jobs[0].State != client.StateCancelled {
		t.Fatalf("search night = %+v, %v; want job %s, cancelled", p.Jobs, err, ids[1])
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"jobs", "retry"}, "give the ids of the jobs, or flags"},
		{[]string{"jobs", "retry", "1", "--queue", "q"}, "not both"},
		{[]string{"jobs", "ls", "--since", "yesterday"}, `--since "yesterday" is neither`},
		{[]string{"enqueue", "q", "--metadata", "{"}, "--metadata"},
		{[]string{"enqueue", "q", "--tag", "two words"}, "jobs[0].tags[0]"},
	} {
		if _, _, err := runCLI(t, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: %v; want an error mentioning %q", tc.args, err, tc.err)
		}
	}
}
