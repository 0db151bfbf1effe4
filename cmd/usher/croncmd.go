package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/client"
)

func newCronCommand() *cobra.Command {
	o := &clientOpts{}
	return group(o, "cron", "Add, list, pause, resume and remove periodic jobs",
		`cron manages periodic jobs (docs/api.md, Periodic jobs): a job made from a
template at every tick of a cron spec, read in a time zone. A spec is the
standard five fields (minute hour day-of-month month day-of-week, e.g.
"*/15 9-17 * * MON-FRI") or a descriptor (@hourly, @daily, @weekly,
@monthly, @yearly, @every 90s). Each tick makes exactly one job, also
across restarts and leader changes; after an outage only the latest missed
tick makes a job, and ticks while paused are skipped. Changing periodic
jobs needs an admin token.`,
		cronAddCommand(o), cronListCommand(o), cronShowCommand(o), cronPauseCommand(o, true),
		cronPauseCommand(o, false), cronRemoveCommand(o))
}

func cronAddCommand(o *clientOpts) *cobra.Command {
	j := &jobFlags{}
	var queue, timezone string
	var paused bool
	cmd := &cobra.Command{
		Use:   "add NAME SPEC",
		Short: "Add a periodic job",
		Long: `add makes a periodic job NAME (admin; 1-128 characters of A-Z a-z 0-9 . _ -)
that submits a job to --queue at every tick of SPEC, in --timezone (an IANA
name; default UTC). The job flags are those of enqueue. Its first tick is
the first after now.`,
		Example: `  usher cron add nightly-report '30 2 * * *' --queue reports --timezone Europe/Paris --payload '{"kind":"daily"}'
  usher cron add heartbeat '@every 1m' --queue ping --text hello --priority 5
  usher cron add weekdays '0 9 * * MON-FRI' --queue mail --key smtp --tier slow --max-attempts 3`,
		Args: cobra.ExactArgs(2),
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "queue of the jobs (required)")
	f.StringVar(&timezone, "timezone", "", "IANA time zone the spec is read in (default UTC)")
	f.BoolVar(&paused, "paused", false, "add it paused (resume it with usher cron resume)")
	f.StringVar(&j.payload, "payload", "", "payload of each job as JSON (any value)")
	f.StringVar(&j.text, "text", "", "payload of each job as a JSON string of this text")
	f.StringVar(&j.tier, "tier", "", "duration tier (e.g. fast, medium, slow), or default for an elastic job")
	f.DurationVar(&j.timeout, "timeout", 0, "time limit (alone it picks the fastest tier that fits)")
	f.IntVar(&j.priority, "priority", 0, "order within the queue, higher first (-32768..32767)")
	f.StringArrayVar(&j.keys, "key", nil, "limit key the job holds while running (repeatable)")
	f.StringVar(&j.group, "group", "", "exclusive group (at most one running job per group)")
	f.StringVar(&j.mode, "mode", "", "read or write, with --group")
	f.IntVar(&j.maxAttempts, "max-attempts", 0, "attempts (default: the queue's policy)")
	f.DurationVar(&j.backoff, "backoff", 0, "wait before the second attempt, doubling after")
	f.DurationVar(&j.maxBackoff, "max-backoff", 0, "longest wait between attempts")
	_ = cmd.MarkFlagRequired("queue")
	cmd.RunE = withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
		tmpl, err := j.spec(cmd, queue)
		if err != nil {
			return err
		}
		got, err := c.CreateCron(cmd.Context(), client.CronSpec{Name: args[0], Spec: args[1], Queue: queue,
			Timezone: timezone, Job: tmpl, Paused: paused})
		if err != nil {
			return fmt.Errorf("adding periodic job %s: %w", args[0], err)
		}
		return printCrons(cmd, o, got)
	})
	return cmd
}

func cronListCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the periodic jobs",
		Example: "  usher cron ls\n  usher cron ls --json | jq '.crons[] | select(.paused)'",
		Args:    cobra.NoArgs,
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, _ []string) error {
			cs, err := c.Crons(cmd.Context())
			if err != nil {
				return fmt.Errorf("listing periodic jobs: %w", err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"crons": cs})
			}
			return printCrons(cmd, o, cs...)
		}),
	}
}

func cronShowCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "show NAME",
		Short:   "Show a periodic job",
		Example: "  usher cron show nightly-report --json",
		Args:    cobra.ExactArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			got, err := c.Cron(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("reading periodic job %s: %w", args[0], err)
			}
			return printCrons(cmd, o, got)
		}),
	}
}

// cronPauseCommand is pause (pause true) or resume.
func cronPauseCommand(o *clientOpts, pause bool) *cobra.Command {
	use, short, long := "pause NAME...", "Pause periodic jobs", "pause stops periodic jobs from making jobs until resumed (admin)."
	if !pause {
		use, short, long = "resume NAME...", "Resume paused periodic jobs",
			"resume lets paused periodic jobs make jobs again (admin), from their first tick after now:\nticks that passed while paused are skipped."
	}
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: "  usher cron " + use[:len(use)-len(" NAME...")] + " nightly-report",
		Args:    cobra.MinimumNArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			var out []client.Cron
			for _, name := range args {
				set := c.ResumeCron
				if pause {
					set = c.PauseCron
				}
				got, err := set(cmd.Context(), name)
				if err != nil {
					return fmt.Errorf("%s periodic job %s: %w", use[:len(use)-len(" NAME...")], name, err)
				}
				out = append(out, got)
			}
			if o.json && len(out) > 1 {
				return printJSON(cmd.OutOrStdout(), map[string]any{"crons": out})
			}
			return printCrons(cmd, o, out...)
		}),
	}
}

func cronRemoveCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "remove NAME...",
		Aliases: []string{"rm", "delete"},
		Short:   "Remove periodic jobs; the jobs they made stay",
		Example: "  usher cron remove nightly-report",
		Args:    cobra.MinimumNArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			for _, name := range args {
				if err := c.DeleteCron(cmd.Context(), name); err != nil {
					return fmt.Errorf("removing periodic job %s: %w", name, err)
				}
			}
			return printDeleted(cmd, o, "periodic job", args)
		}),
	}
}

// printCrons prints periodic jobs as a table, or one as JSON with --json.
func printCrons(cmd *cobra.Command, o *clientOpts, cs ...client.Cron) error {
	if o.json && len(cs) == 1 {
		return printJSON(cmd.OutOrStdout(), cs[0])
	}
	t := newTable(cmd.OutOrStdout(), "NAME", "SPEC", "TIMEZONE", "QUEUE", "PAUSED", "NEXT", "LAST")
	for _, c := range cs {
		t.row(c.Name, c.Spec, c.Timezone, c.Queue, c.Paused, timeCell(c.NextAt), timeCell(c.LastAt))
	}
	return t.flush()
}

// timeCell shows an optional time in RFC 3339, or "-".
func timeCell(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
