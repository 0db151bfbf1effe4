package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/client"
)

// runCLI runs the usher command in-process with args and stdin, and returns
// its standard output and error and its error.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// cliStep is one command of the CLI table. Args may hold {name}
// placeholders filled from what earlier steps saved.
type cliStep struct {
	args    []string
	stdin   string
	out     []string                             // parts of stdout, in order
	stderr  string                               // part of stderr
	err     string                               // part of the error; "" for success
	json    func(t *testing.T, v map[string]any) // with --json: checks the parsed output
	save    func(out string, vars map[string]string)
	noToken bool // run without --token
}

// Each client subcommand against the real server: tables for people,
// --json that parses, and errors that say what to do.
func TestCLI(t *testing.T) {
	srv, _ := agentServer(t)
	t.Setenv("USHER_TOKEN", "")
	t.Setenv("USHER_SERVER", "")
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wfYAML := write("wf.yaml", `name: nightly
jobs:
  - {name: extract, queue: etl, payload: {table: users}}
  - {name: clean, queue: etl, after: [extract]}
  - name: report
    queue: etl
    after: [clean]
edges:
  - {from: extract, to: report}
`)
	wfCycle := write("cycle.json", `{"jobs": [{"name": "a", "queue": "etl", "after": ["b"]}, {"name": "b", "queue": "etl", "after": ["a"]}]}`)
	targets := write("targets.txt", "192.0.2.1\n192.0.2.2\n")
	firstLine := func(key string) func(string, map[string]string) {
		return func(out string, vars map[string]string) { vars[key] = strings.SplitN(out, "\n", 2)[0] }
	}
	// The --json steps read the command's output as raw JSON: what they
	// check is the shape the CLI prints, which scripts (jq) rely on.
	steps := []cliStep{
		{args: []string{"queue", "create", "scan", "--priority", "10", "--requires", "net", "--order", "random", "--batch", "2"},
			out: []string{"NAME", "PRIORITY", "scan", "10", "random", "2", "true", "net", "once"}},
		{args: []string{"queue", "create", "etl", "--max-attempts", "3", "--backoff", "1s"}, out: []string{"etl", "fifo", "3 attempts, backoff 1s"}},
		{args: []string{"queue", "create", "etl"}, err: "409"},
		{args: []string{"queue", "ls"}, out: []string{"NAME", "etl", "scan"}},
		{args: []string{"queue", "ls", "--json"}, json: func(t *testing.T, v map[string]any) {
			if qs, _ := v["queues"].([]any); len(qs) != 2 {
				t.Errorf("queues %v", v)
			}
		}},
		{args: []string{"queue", "show", "scan", "--json"}, json: func(t *testing.T, v map[string]any) {
			if v["name"] != "scan" || v["order"] != "random" {
				t.Errorf("queue %v", v)
			}
		}},
		{args: []string{"queue", "update", "scan", "--active=false", "--priority", "20"}, out: []string{"scan", "20", "random", "false"}},
		{args: []string{"queue", "update", "etl", "--max-attempts", "5"}, out: []string{"etl", "5 attempts, backoff 1s"}},
		{args: []string{"queue", "update", "etl", "--backoff-policy", "linear", "--max-backoff", "10s"}, out: []string{"etl", "5 attempts, backoff 1s linear up to 10s"}},
		{args: []string{"queue", "update", "etl", "--backoff-policy", "fibonacci"}, err: "retry.backoff.policy"},
		{args: []string{"queue", "show", "nope"}, err: "404"},
		{args: []string{"queue", "create", "deploy", "--order", "strict", "--strict-start"}, out: []string{"deploy", "strict-start"}},
		{args: []string{"queue", "show", "deploy", "--json"}, json: func(t *testing.T, v map[string]any) {
			if v["strictStart"] != true {
				t.Errorf("queue %v", v)
			}
		}},
		{args: []string{"queue", "update", "deploy", "--order", "fifo"}, err: "strictStart"},
		{args: []string{"queue", "update", "deploy", "--strict-start=false"}, out: []string{"deploy", "strict ", "true"}},
		{args: []string{"queue", "create", "loose", "--strict-start"}, err: "strict queues only"},
		{args: []string{"queue", "rm", "deploy"}},
		{args: []string{"limit", "set", "net:*", "5"}, out: []string{"PATTERN", "LIMIT", "net:*", "5"}},
		{args: []string{"limit", "set", "net:*", "many"}, err: "not a count"},
		{args: []string{"limit", "set", "api:stripe", "--rate", "100/s", "--burst", "20"}, out: []string{"PATTERN", "LIMIT", "RATE", "BURST", "api:stripe", "0", "100/s", "20"}},
		{args: []string{"limit", "set", "api:*", "--rate", "0/s"}, err: "--rate"},
		{args: []string{"limit", "set", "api:*", "--rate", "600/m"}, out: []string{"api:*", "600/m", "10"}},
		{args: []string{"limit", "set", "api:*", "--rate", "10/s", "--burst", "-2"}, err: "burst"},
		{args: []string{"limit", "set", "api:*"}, err: "give a LIMIT, a --rate or both"},
		{args: []string{"limit", "set", "api:*", "0"}, out: []string{"api:*", "0", "-"}},
		{args: []string{"limit", "ls", "--json"}, json: func(t *testing.T, v map[string]any) {
			if ls, _ := v["limits"].([]any); len(ls) != 2 {
				t.Errorf("limits %v", v)
			}
		}},
		{args: []string{"enqueue", "etl", "--text", "hello", "--timeout", "30s", "--priority", "2", "--key", "db:1"}, save: firstLine("job")},
		{args: []string{"enqueue", "etl", "--payload", "{bad"}, err: "is not JSON"},
		{args: []string{"enqueue", "--text", "x"}, err: "name the QUEUE"},
		{args: []string{"enqueue", "etl", "-f", "-"}, stdin: `{"payload": 1}` + "\n" + `{"queue": "scan", "payload": "2"}` + "\n",
			save: func(out string, vars map[string]string) {
				if n := len(strings.Fields(out)); n != 2 {
					vars["error"] = out
				}
			}},
		{args: []string{"enqueue", "-f", "-", "--json"}, stdin: `[{"queue": "etl"}, {"queue": "etl", "group": "g", "mode": "read"}]`,
			json: func(t *testing.T, v map[string]any) {
				if ids, _ := v["ids"].([]any); len(ids) != 2 {
					t.Errorf("ids %v", v)
				}
			}},
		{args: []string{"enqueue", "-f", "-"}, stdin: `{"queue": "etl", "colour": "red"}`, err: "colour"},
		{args: []string{"enqueue", "etl", "-f", "-"}, stdin: `[{"queue": "nope"}]`, err: "jobs[0]"},
		{args: []string{"enqueue", "etl", "--text", "once", "--idempotency-key", "order-1"}, save: firstLine("keyed")},
		{args: []string{"enqueue", "etl", "--text", "twice", "--idempotency-key", "order-1"}, out: []string{"{keyed}\n"},
			stderr: "job {keyed} existed already"},
		{args: []string{"enqueue", "etl", "--idempotency-key", ""}, err: "--idempotency-key is empty"},
		{args: []string{"enqueue", "etl", "--text", "u", "--unique-by-args", "--unique-period", "1h"}},
		{args: []string{"enqueue", "etl", "--text", "u", "--unique-by-args", "--unique-period", "1h", "--json"},
			json: func(t *testing.T, v map[string]any) {
				if ex, _ := v["existing"].([]any); len(ex) != 1 || ex[0] != true {
					t.Errorf("answer %v; want existing [true]", v)
				}
			}},
		{args: []string{"enqueue", "etl", "--unique-states", "succeeded"}, err: "jobs[0].unique.states[0]"},
		{args: []string{"targets", "add", "scan", "-"}, stdin: "10.1.2.3\n\n10.1.2.4\n2001:db8::1\n", out: []string{"enqueued 3 targets to scan as jobs"}},
		{args: []string{"targets", "add", "scan", targets, "--json"}, json: func(t *testing.T, v map[string]any) {
			if ids, _ := v["ids"].([]any); len(ids) != 2 {
				t.Errorf("ids %v", v)
			}
		}},
		{args: []string{"workflow", "submit", wfYAML}, out: []string{"workflow", "submitted", "NAME", "JOB", "extract", "clean", "report"},
			save: func(out string, vars map[string]string) { vars["wf"] = strings.Fields(out)[1] }},
		{args: []string{"workflow", "submit", wfCycle}, err: "cycle"},
		{args: []string{"workflow", "show", "{wf}"}, out: []string{"nightly: running", "ID", "STATE", "queued", "waiting"}},
		{args: []string{"workflow", "show", "{wf}", "--json"}, json: func(t *testing.T, v map[string]any) {
			if jobs, _ := v["jobs"].([]any); len(jobs) != 3 || v["state"] != "running" {
				t.Errorf("workflow %v", v)
			}
		}},
		{args: []string{"jobs", "ls", "--queue", "scan"}, out: []string{"ID", "QUEUE", "STATE", "scan", "queued"}},
		{args: []string{"jobs", "ls", "--queue", "scan", "--limit", "2"}, stderr: "more jobs follow: add --after"},
		{args: []string{"jobs", "ls", "--queue", "scan", "--limit", "2", "--all", "--json"}, json: func(t *testing.T, v map[string]any) {
			if jobs, _ := v["jobs"].([]any); len(jobs) != 6 {
				t.Errorf("%d jobs of scan: %v", len(jobs), v)
			}
		}},
		{args: []string{"jobs", "show", "{job}"}, out: []string{"id:", "queue:", "etl", "payload:", `"hello"`, "timeout:", "30s", "keys:", "db:1"}},
		{args: []string{"jobs", "show", "{job}", "--json"}, json: func(t *testing.T, v map[string]any) {
			if v["payload"] != "hello" || v["state"] != "queued" {
				t.Errorf("job %v", v)
			}
		}},
		{args: []string{"jobs", "cancel", "{job}"}, out: []string{"{job}", "cancelled"}},
		{args: []string{"jobs", "cancel", "{job}"}, err: "409"},
		{args: []string{"jobs", "retry", "{job}", "--json"}, json: func(t *testing.T, v map[string]any) {
			if jobs, _ := v["jobs"].([]any); len(jobs) != 1 || jobs[0].(map[string]any)["state"] != "queued" {
				t.Errorf("retried %v", v)
			}
		}},
		{args: []string{"stats"}, out: []string{"QUEUE", "QUEUED", "BLOCKED", "scan", "KEY", "net:10.1.2.0/24", "GROUP", "TIER", "fast", "AGENT", "started 0"}},
		{args: []string{"stats", "--json"}, json: func(t *testing.T, v map[string]any) {
			if _, ok := v["counters"].(map[string]any); !ok {
				t.Errorf("stats %v", v)
			}
		}},
		{args: []string{"token", "create", "bot", "--role", "agent"}, out: []string{"id:", "name:", "bot", "role:", "agent", "token:", "usher_"},
			stderr: "shown only now", save: func(out string, vars map[string]string) {
				for _, l := range strings.Split(out, "\n") {
					if f := strings.Fields(l); len(f) == 2 && f[0] == "id:" {
						vars["tokid"] = f[1]
					} else if len(f) == 2 && f[0] == "token:" {
						vars["agenttoken"] = f[1]
					}
				}
			}},
		{args: []string{"token", "create", "ci", "--json"}, json: func(t *testing.T, v map[string]any) {
			if v["role"] != "client" || !strings.HasPrefix(v["token"].(string), "usher_") {
				t.Errorf("token %v", v)
			}
		}},
		// Two tokens made within a millisecond list in either order.
		{args: []string{"token", "ls"}, out: []string{"ID", "NAME", "ROLE", "bot", "agent"}},
		{args: []string{"token", "ls"}, out: []string{"ci", "client"}},
		{args: []string{"queue", "create", "mine", "--token", "{agenttoken}"}, noToken: true, err: "this token's role may not do that"},
		{args: []string{"jobs", "show", "{job}", "--token", "{agenttoken}"}, noToken: true, out: []string{"id:"}},
		{args: []string{"token", "rm", "{tokid}"}, out: []string{"deleted token {tokid}"}},
		{args: []string{"queue", "ls"}, noToken: true, err: "no token was given: pass one with --token or $USHER_TOKEN"},
		{args: []string{"queue", "ls", "--token", "usher_wrong"}, noToken: true, err: "does not know this token"},
		{args: []string{"cron", "add", "nightly", "30 2 * * *", "--queue", "scan", "--timezone", "Europe/Paris", "--payload", `{"k":1}`, "--priority", "3"},
			out: []string{"NAME", "NEXT", "nightly", "30 2 * * *", "Europe/Paris", "scan", "false"}},
		{args: []string{"cron", "add", "bad", "61 * * * *", "--queue", "scan"}, err: "spec: \"61 * * * *\" does not parse"},
		{args: []string{"cron", "add", "bad", "@daily", "--queue", "scan", "--timezone", "Moon/Base"}, err: "timezone: unknown time zone"},
		{args: []string{"cron", "pause", "nightly"}, out: []string{"nightly", "true"}},
		{args: []string{"cron", "resume", "nightly", "--json"}, json: func(t *testing.T, v map[string]any) {
			job, _ := v["job"].(map[string]any)
			if v["paused"] != false || v["nextAt"] == nil || job["priority"] != 3.0 || job["queue"] != "scan" {
				t.Errorf("resumed %v", v)
			}
		}},
		{args: []string{"cron", "ls", "--json"}, json: func(t *testing.T, v map[string]any) {
			if c, _ := v["crons"].([]any); len(c) != 1 {
				t.Errorf("crons %v", v)
			}
		}},
		{args: []string{"cron", "remove", "nightly"}, out: []string{"deleted periodic job nightly"}},
		{args: []string{"queue", "flush", "scan"}, out: []string{"cancelled 6 queued jobs of scan"}},
		{args: []string{"queue", "rm", "scan", "--json"}, json: func(t *testing.T, v map[string]any) {
			if d, _ := v["deleted"].([]any); len(d) != 1 {
				t.Errorf("deleted %v", v)
			}
		}},
	}
	vars := map[string]string{}
	for i, s := range steps {
		args := fill(s.args, vars)
		full := append(append([]string{}, args...), "--server", srv.URL)
		if !s.noToken {
			full = append(full, "--token", srv.AdminToken)
		}
		out, stderr, err := runCLI(t, s.stdin, full...)
		name := strings.Join(args, " ")
		switch {
		case s.err == "" && err != nil:
			t.Fatalf("step %d %q: %v", i, name, err)
		case s.err != "" && (err == nil || !strings.Contains(err.Error(), s.err)):
			t.Fatalf("step %d %q: error %v, want one with %q", i, name, err, s.err)
		}
		if rest := out; len(s.out) > 0 {
			for _, part := range fill(s.out, vars) {
				k := strings.Index(rest, part)
				if k < 0 {
					t.Fatalf("step %d %q: output lacks %q (in order):\n%s", i, name, part, out)
				}
				rest = rest[k+len(part):]
			}
		}
		if want := fill([]string{s.stderr}, vars)[0]; !strings.Contains(stderr, want) {
			t.Fatalf("step %d %q: stderr %q lacks %q", i, name, stderr, want)
		}
		if s.json != nil {
			var v map[string]any
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("step %d %q: --json output does not parse: %v\n%s", i, name, err, out)
			}
			s.json(t, v)
		}
		if s.save != nil {
			s.save(out, vars)
		}
	}
	if vars["error"] != "" {
		t.Fatalf("enqueue of JSON lines printed %q", vars["error"])
	}
}

// fill replaces {name} placeholders with saved values.
func fill(args []string, vars map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range vars {
			a = strings.ReplaceAll(a, "{"+k+"}", v)
		}
		out[i] = a
	}
	return out
}

// The server address and token come from $USHER_SERVER and $USHER_TOKEN,
// else from ./usher-admin.token; an unreachable server is named.
func TestCLIEnvironmentAndTokenFile(t *testing.T) {
	srv, c := agentServer(t, "q")
	t.Setenv("USHER_SERVER", srv.URL)
	t.Setenv("USHER_TOKEN", srv.AdminToken)
	if out, _, err := runCLI(t, "", "queue", "ls"); err != nil || !strings.Contains(out, "q") {
		t.Fatalf("from the environment: %q, %v", out, err)
	}
	t.Setenv("USHER_TOKEN", "")
	t.Chdir(t.TempDir())
	if err := os.WriteFile(adminTokenFile, []byte(srv.AdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCLI(t, "", "enqueue", "q", "--text", "x"); err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("with the token file: %q, %v", out, err)
	}
	if p, err := c.Jobs(t.Context(), client.JobFilter{Queue: "q"}); err != nil || len(p.Jobs) != 1 {
		t.Fatalf("jobs %+v, %v", p, err)
	}
	_, _, err := runCLI(t, "", "stats", "--server", "http://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "cannot reach the usher server at http://127.0.0.1:1") {
		t.Fatalf("unreachable server: %v", err)
	}
}

// Every command a user runs explains itself with an example in --help.
func TestCLIHelpHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c.Name() == "serve" || c.Name() == "backend" || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		out, _, err := runCLI(t, "", append(strings.Fields(c.CommandPath())[1:], "--help")...)
		if err != nil || !strings.Contains(out, "Examples:") || !strings.Contains(out, "Usage:") {
			t.Errorf("%s --help: %v\n%s", c.CommandPath(), err, out)
		}
	}
	walk(newRootCommand())
}
