package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/client"
)

// jobFlags describe one job on the command line.
type jobFlags struct {
	payload, text, tier, group, mode string
	timeout, backoff, maxBackoff     time.Duration
	priority, maxAttempts            int
	keys, after                      []string
	runAfterFailure                  bool
	file                             string
	dedup                            dedupFlags
	runAt, deadline                  string
	delay                            time.Duration
	tags                             []string
	metadata                         string
}

// newJobsSubmitCommand is enqueue as `usher jobs submit`.
func newJobsSubmitCommand() *cobra.Command {
	cmd := newEnqueueCommand()
	cmd.Use = "submit [QUEUE]"
	cmd.Example = `  usher jobs submit report --run-at 2026-12-01T06:00:00Z
  usher jobs submit scan --text 10.1.2.3 --delay 10m --deadline 2026-12-01T07:00:00Z`
	return cmd
}

func newEnqueueCommand() *cobra.Command {
	o, j := &clientOpts{}, &jobFlags{}
	cmd := &cobra.Command{
		Use:   "enqueue [QUEUE]",
		Short: "Submit jobs: one from flags, or many from a file",
		Long: `enqueue submits one job to QUEUE described by the flags, or with --file many
jobs as JSON lines or one JSON array (each object as docs/api.md's job:
{"queue", "payload", "tier", "timeoutMs", "priority", "keys", "group",
"mode", "after", "runAfterFailure", "retry", "runAt", "delayMs", "deadline",
"tags", "metadata"});
with --file a QUEUE fills in the queue of jobs that name none. All jobs are
accepted or none. It prints the new jobs' ids, one a line. --run-at or
--delay schedule the job's first run (it is scheduled until then);
--deadline discards it if it has not started by then.`,
		Example: `  usher enqueue scan --text 10.1.2.3 --key net:10.1.2.0/24
  usher enqueue etl --payload '{"table": "users"}' --timeout 5m --max-attempts 3 --backoff 10s
  usher enqueue db --group db1 --mode write --after 812
  usher enqueue mail --payload '{"order": 17}' --idempotency-key order-17-mail
  usher enqueue report --text daily --unique-by-args --unique-period 24h
  usher enqueue mail --text ana@example.org --tag signup --tag eu --metadata '{"campaign": 7}'
  usher enqueue --file jobs.jsonl
  generate-jobs | usher enqueue --file - --json`,
		Args: cobra.MaximumNArgs(1),
	}
	f := cmd.Flags()
	f.StringVar(&j.payload, "payload", "", "payload as JSON (any value)")
	f.StringVar(&j.text, "text", "", "payload as a JSON string of this text")
	f.StringVar(&j.tier, "tier", "", "duration tier (e.g. fast, medium, slow), or default for an elastic job")
	f.DurationVar(&j.timeout, "timeout", 0, "time limit (alone it picks the fastest tier that fits)")
	f.IntVar(&j.priority, "priority", 0, "order within the queue, higher first (-32768..32767)")
	f.StringArrayVar(&j.keys, "key", nil, "limit key the job holds while running (repeatable)")
	f.StringVar(&j.group, "group", "", "exclusive group (at most one running job per group)")
	f.StringVar(&j.mode, "mode", "", "read or write, with --group")
	f.StringSliceVar(&j.after, "after", nil, "id of a job that must succeed first (repeatable)")
	f.BoolVar(&j.runAfterFailure, "run-after-failure", false, "run even when a job of --after fails")
	f.IntVar(&j.maxAttempts, "max-attempts", 0, "attempts (default: the queue's policy)")
	f.DurationVar(&j.backoff, "backoff", 0, "wait before the second attempt, doubling after")
	f.DurationVar(&j.maxBackoff, "max-backoff", 0, "longest wait between attempts")
	f.StringVarP(&j.file, "file", "f", "", "read jobs as JSON lines or a JSON array from this file (- for stdin)")
	j.dedup.register(cmd)
	f.StringVar(&j.runAt, "run-at", "", "run first at this RFC 3339 time (e.g. 2026-12-01T06:00:00Z)")
	f.DurationVar(&j.delay, "delay", 0, "run first after this long (e.g. 10m)")
	f.StringVar(&j.deadline, "deadline", "", "discard the job if it has not started by this RFC 3339 time")
	f.StringArrayVar(&j.tags, "tag", nil, "a tag to find the job by (repeatable)")
	f.StringVar(&j.metadata, "metadata", "", "a JSON object kept with the job")
	o.register(cmd)
	cmd.RunE = withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
		specs, err := j.specs(cmd, args)
		if err != nil {
			return err
		}
		ans, err := c.EnqueueAnswer(cmd.Context(), specs...)
		if err != nil {
			return fmt.Errorf("enqueueing %d jobs: %w", len(specs), err)
		}
		return printAnswer(cmd, o, ans)
	})
	return cmd
}

// specs are the jobs to submit: from the file, or the one of the flags.
func (j *jobFlags) specs(cmd *cobra.Command, args []string) ([]client.JobSpec, error) {
	queue := ""
	if len(args) == 1 {
		queue = args[0]
	}
	if j.file != "" {
		specs, err := readJobs(cmd, j.file)
		for i := range specs {
			if specs[i].Queue == "" {
				specs[i].Queue = queue
			}
		}
		return specs, err
	}
	if queue == "" {
		return nil, errors.New("name the QUEUE of the job, or give jobs with --file")
	}
	spec, err := j.spec(cmd, queue)
	return []client.JobSpec{spec}, err
}

func (j *jobFlags) spec(cmd *cobra.Command, queue string) (client.JobSpec, error) {
	s := client.JobSpec{Queue: queue, Tier: j.tier, TimeoutMs: j.timeout.Milliseconds(), Priority: j.priority,
		Keys: j.keys, Group: j.group, Mode: j.mode, After: j.after, RunAfterFailure: j.runAfterFailure, Tags: j.tags}
	f := cmd.Flags()
	if j.metadata != "" {
		if !json.Valid([]byte(j.metadata)) {
			return s, fmt.Errorf("--metadata %q is not JSON", j.metadata)
		}
		s.Metadata = json.RawMessage(j.metadata)
	}
	switch {
	case f.Changed("payload") && f.Changed("text"):
		return s, errors.New("give the payload with --payload (JSON) or --text (a string), not both")
	case f.Changed("payload"):
		if !json.Valid([]byte(j.payload)) {
			return s, fmt.Errorf("--payload %q is not JSON (for a plain string use --text)", j.payload)
		}
		s.Payload = json.RawMessage(j.payload)
	case f.Changed("text"):
		b, _ := json.Marshal(j.text)
		s.Payload = b
	}
	if err := j.schedule(&s); err != nil {
		return s, err
	}
	if f.Changed("max-attempts") || f.Changed("backoff") || f.Changed("max-backoff") {
		s.Retry = &client.RetryPolicy{MaxAttempts: j.maxAttempts, BackoffMs: j.backoff.Milliseconds(),
			MaxBackoffMs: j.maxBackoff.Milliseconds()}
	}
	return s, j.dedup.apply(cmd, &s)
}

// schedule fills in --run-at, --delay and --deadline; the server checks
// the values.
func (j *jobFlags) schedule(s *client.JobSpec) error {
	for _, t := range []struct {
		flag, text string
		dst        **time.Time
	}{{"--run-at", j.runAt, &s.RunAt}, {"--deadline", j.deadline, &s.Deadline}} {
		if t.text == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, t.text)
		if err != nil {
			return fmt.Errorf("%s %q is not an RFC 3339 time (e.g. 2026-12-01T06:00:00Z)", t.flag, t.text)
		}
		*t.dst = &at
	}
	if j.delay < 0 {
		return fmt.Errorf("--delay %s is negative", j.delay)
	}
	if j.delay > 0 && s.RunAt != nil {
		return errors.New("give --run-at or --delay, not both")
	}
	s.DelayMs = j.delay.Milliseconds()
	return nil
}

// readJobs reads jobs as one JSON array or a sequence of JSON objects (JSON
// lines) from a file or, for "-", standard input.
func readJobs(cmd *cobra.Command, name string) ([]client.JobSpec, error) {
	data, err := readInput(cmd, name)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%s holds no jobs", inputName(name))
	}
	var specs []client.JobSpec
	if trimmed[0] == '[' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&specs); err != nil {
			return nil, fmt.Errorf("%s: %w", inputName(name), err)
		}
		return specs, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	for dec.More() {
		var s client.JobSpec
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s: job %d: %w", inputName(name), len(specs)+1, err)
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// readInput reads a file, or standard input for "-".
func readInput(cmd *cobra.Command, name string) ([]byte, error) {
	if name == "-" {
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	return b, nil
}

func inputName(name string) string {
	if name == "-" {
		return "standard input"
	}
	return name
}

func newTargetsCommand() *cobra.Command {
	o := &clientOpts{}
	add := &cobra.Command{
		Use:   "add QUEUE [FILE|-]",
		Short: "Submit one job per target line to a queue",
		Long: `add submits one job per line of FILE (standard input when FILE is - or
missing) to QUEUE, as targets of a scan: blank lines are ignored and spaces
trimmed; each job's payload is its line as a JSON string and its key is
derived from the target (net:a.b.c.0/24 for IPv4, /48 for IPv6, the host for
host:port and URLs), so that a limit such as 'net:*' 5 caps the running jobs
per network.`,
		Example: `  usher targets add scan targets.txt
  printf '10.1.2.3\n10.1.2.4\n2001:db8::1\n' | usher targets add scan`,
		Args: cobra.RangeArgs(1, 2),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			in := cmd.InOrStdin()
			if len(args) == 2 && args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return fmt.Errorf("reading targets: %w", err)
				}
				defer f.Close()
				in = f
			}
			ids, err := c.EnqueueTargets(cmd.Context(), args[0], in)
			if err != nil {
				return fmt.Errorf("adding targets to %s: %w", args[0], err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string][]string{"ids": ids})
			}
			if len(ids) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no targets (every line was blank)")
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "enqueued %d targets to %s as jobs %s to %s\n", len(ids), args[0], ids[0], ids[len(ids)-1])
			return nil
		}),
	}
	return group(o, "targets", "Submit scan targets, one job per line",
		"targets submits lines of targets as jobs, one per line, keyed by network.", add)
}

func newJobsCommand() *cobra.Command {
	o := &clientOpts{}
	return group(o, "jobs", "List, show, cancel and retry jobs",
		`jobs submits, reads and steers jobs. A job's state is waiting (for its
dependencies), scheduled (for its first run's time), delayed (waiting to
retry), queued, running, succeeded, failed or cancelled.`,
		newJobsSubmitCommand(), jobsListCommand(o), jobsShowCommand(o), jobsActCommand(o, client.ActionCancel),
		jobsActCommand(o, client.ActionRetry), jobsActCommand(o, client.ActionRun), jobsActCommand(o, client.ActionDelete))
}

func jobsListCommand(o *clientOpts) *cobra.Command {
	var (
		f   client.JobFilter
		sel selectFlags
		all bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List and find jobs by queue, state, workflow, key, tag, text or time",
		Long: `ls lists jobs in id order (--newest-first: newest first), a page at a time
(--limit, at most 1000); when more follow it says which --after gives the
next page. --all reads every page. --search finds the job of that id and the
jobs carrying a tag that begins with it; --since and --until bound the
creation time (an RFC 3339 time, or a duration back from now: 2h).`,
		Example: `  usher jobs ls --queue scan --state failed
  usher jobs ls --tag nightly --since 2h --newest-first
  usher jobs ls --key net:10.1.2.0/24 --state queued
  usher jobs ls --state scheduled
  usher jobs ls --workflow 3 --all
  usher jobs ls --state running --json | jq -r '.jobs[].id'`,
		Args: cobra.NoArgs,
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if err := sel.apply(&f); err != nil {
				return err
			}
			page, err := listJobs(cmd, c, f, all)
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), page)
			}
			if err := printJobs(cmd, page.Jobs); err != nil {
				return err
			}
			if page.Next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more jobs follow: add --after %s (or --all)\n", page.Next)
			}
			return nil
		}),
	}
	fl := cmd.Flags()
	sel.register(cmd, &f)
	fl.BoolVar(&f.Desc, "newest-first", false, "list the newest jobs first")
	fl.IntVar(&f.Limit, "limit", 100, "jobs per page (at most 1000)")
	fl.StringVar(&f.After, "after", "", "list jobs after this id (the previous page's next)")
	fl.BoolVar(&all, "all", false, "read every page")
	return cmd
}

// listJobs reads one page, or with all every page as one.
func listJobs(cmd *cobra.Command, c *client.Client, f client.JobFilter, all bool) (client.JobPage, error) {
	if !all {
		page, err := c.Jobs(cmd.Context(), f)
		if err != nil {
			return page, fmt.Errorf("listing jobs: %w", err)
		}
		return page, nil
	}
	var page client.JobPage
	for j, err := range c.AllJobs(cmd.Context(), f) {
		if err != nil {
			return page, fmt.Errorf("listing jobs: %w", err)
		}
		page.Jobs = append(page.Jobs, j)
	}
	return page, nil
}

// printJobs prints jobs as a table.
func printJobs(cmd *cobra.Command, jobs []client.Job) error {
	t := newTable(cmd.OutOrStdout(), "ID", "QUEUE", "STATE", "ATTEMPT", "AGENT", "CREATED", "EXIT", "ERROR")
	for _, j := range jobs {
		t.row(j.ID, j.Queue, j.State, fmt.Sprintf("%d/%d", j.Attempt, max(j.MaxAttempts, 1)), orDash(j.Agent),
			when(j.CreatedAt), exitText(j.ExitCode), orDash(oneLine(j.Error, 60)))
	}
	return t.flush()
}

func exitText(code *int) string {
	if code == nil {
		return "-"
	}
	return strconv.Itoa(*code)
}

// oneLine shortens s to one line of at most n characters.
func oneLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + "…"
	}
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

func jobsShowCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "show ID",
		Short:   "Show a job: its settings, state, result and output",
		Example: "  usher jobs show 812\n  usher jobs show 812 --json | jq -r .output",
		Args:    cobra.ExactArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			j, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("reading job %s: %w", args[0], err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), j)
			}
			return printJob(cmd.OutOrStdout(), j)
		}),
	}
}

// printJob prints one job's fields, one a line, and its output last.
func printJob(w io.Writer, j client.Job) error {
	t := newTable(w, "id:", j.ID)
	for _, f := range [][2]string{
		{"queue:", j.Queue}, {"state:", string(j.State)}, {"workflow:", orDash(j.Workflow)},
		{"payload:", orDash(string(j.Payload))}, {"tier:", orDash(j.Tier)}, {"timeout:", millis(j.TimeoutMs)},
		{"priority:", strconv.Itoa(j.Priority)}, {"keys:", list(j.Keys)},
		{"group:", orDash(strings.TrimSpace(j.Group + " " + j.Mode))}, {"after:", list(j.After)},
		{"attempt:", fmt.Sprintf("%d of %d", j.Attempt, max(j.MaxAttempts, 1))}, {"agent:", orDash(j.Agent)},
		{"run at:", whenSet(j.RunAt)}, {"deadline:", whenSet(j.Deadline)},
		{"created:", when(j.CreatedAt)}, {"started:", whenSet(j.StartedAt)}, {"finished:", whenSet(j.FinishedAt)},
		{"exit code:", exitText(j.ExitCode)}, {"error:", orDash(j.Error)},
		{"backoff:", backoffText(j.Backoff)}, {"progress:", progressText(j.Progress)}, {"result:", orDash(string(j.Result))},
	} {
		t.row(f[0], f[1])
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, a := range j.Attempts {
		fmt.Fprintf(w, "attempt %d on %s, ended %s: exit %s %s\n", a.Attempt, orDash(a.Agent), when(a.EndedAt),
			exitText(a.ExitCode), oneLine(a.Error, 80))
	}
	if j.Output != "" {
		fmt.Fprintf(w, "output:\n%s", j.Output)
		if !strings.HasSuffix(j.Output, "\n") {
			fmt.Fprintln(w)
		}
	}
	return nil
}

// backoffText shows a job's own backoff: "linear 500ms..10s".
func backoffText(b *client.Backoff) string {
	if b == nil {
		return "-"
	}
	s := b.Policy + " " + millis(b.BaseMs)
	if b.MaxMs > 0 {
		s += ".." + millis(b.MaxMs)
	}
	return s
}

// progressText shows a job's last progress: "40% copying".
func progressText(p *client.Progress) string {
	if p == nil {
		return "-"
	}
	return strings.TrimSpace(fmt.Sprintf("%.0f%% %s", p.Value*100, p.Message))
}
