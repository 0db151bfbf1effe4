package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/client"
)

// selectFlags are the flags that select jobs, for `jobs ls` and the bulk
// forms of `jobs cancel|retry|run|delete` (docs/api.md, "Finding jobs").
type selectFlags struct {
	since, until string
}

func (s *selectFlags) register(cmd *cobra.Command, f *client.JobFilter) {
	fl := cmd.Flags()
	fl.StringVar(&f.Queue, "queue", "", "only jobs of this queue")
	fl.StringVar((*string)(&f.State), "state", "", "only jobs in this state")
	fl.StringVar(&f.Workflow, "workflow", "", "only jobs of this workflow")
	fl.StringVar(&f.Key, "key", "", "only jobs holding this key")
	fl.StringVar(&f.Tag, "tag", "", "only jobs carrying this tag")
	fl.StringVar(&f.Q, "search", "", "the job of this id, and jobs with a tag beginning with this text")
	fl.StringVar(&s.since, "since", "", "only jobs created at or after this RFC 3339 time, or this long ago (2h)")
	fl.StringVar(&s.until, "until", "", "only jobs created before this RFC 3339 time, or this long ago")
}

// apply reads --since and --until into f.
func (s *selectFlags) apply(f *client.JobFilter) error {
	var err error
	if f.From, err = pastTime("--since", s.since); err != nil {
		return err
	}
	f.To, err = pastTime("--until", s.until)
	return err
}

// pastTime reads an RFC 3339 time, or a duration back from now.
func pastTime(flag, text string) (time.Time, error) {
	if text == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, text); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(text); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s %q is neither an RFC 3339 time (2026-12-01T02:00:00Z) nor a duration (2h)", flag, text)
}

// selects says whether any selecting flag was given.
func selects(cmd *cobra.Command) bool {
	for _, name := range []string{"queue", "state", "workflow", "key", "tag", "search", "since", "until"} {
		if cmd.Flags().Changed(name) {
			return true
		}
	}
	return false
}

var actionHelp = map[string][2]string{
	client.ActionCancel: {"Cancel jobs that have not finished", `cancel cancels jobs: a queued one at once, a running one is told to stop at
its agent's next lease renewal (its slot frees at once). Their dependants are
cancelled too unless they run after failures. A finished job is refused.`},
	client.ActionRetry: {"Queue failed or cancelled jobs again", `retry queues failed or cancelled jobs again with fresh attempts; other jobs
are refused.`},
	client.ActionRun: {"Run scheduled or delayed jobs now", `run makes scheduled jobs (waiting for their first run's time) and delayed ones
(waiting to retry) ready now; other jobs are refused.`},
	client.ActionDelete: {"Delete jobs", `delete deletes jobs: a finished one at once, a waiting, scheduled, delayed
or queued one is cancelled first. A running job is refused: cancel it, and
delete it once it has ended.`},
}

// jobsActCommand makes `jobs cancel|retry|run|delete`, on the jobs named
// by id or on every job the selecting flags match.
func jobsActCommand(o *clientOpts, verb string) *cobra.Command {
	var (
		f   client.JobFilter
		sel selectFlags
	)
	cmd := &cobra.Command{
		Use:   verb + " [ID...]",
		Short: actionHelp[verb][0],
		Long: actionHelp[verb][1] + `

With selecting flags instead of ids (--queue, --state, --tag, --since, ...)
it acts on every job they match, in batches of --batch jobs, printing its
progress after each batch.`,
		Example: fmt.Sprintf("  usher jobs %s 812 813\n  usher jobs %s --queue email --state failed --since 2026-11-28T02:00:00Z", verb, verb),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			bulk := selects(cmd)
			switch {
			case bulk && len(args) > 0:
				return errors.New("give job ids or selecting flags, not both")
			case !bulk && len(args) == 0:
				return errors.New("give the ids of the jobs, or flags that select them (--queue, --state, --tag, ...)")
			}
			if !bulk {
				return actOnIDs(cmd, o, c, verb, args)
			}
			if err := sel.apply(&f); err != nil {
				return err
			}
			ans, err := c.ActOnAll(cmd.Context(), verb, f, func(a client.ActionAnswer) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d jobs matched, %d changed so far\n", verb, a.Matched, a.Changed)
			})
			if err != nil {
				return fmt.Errorf("%s jobs: %w", verb, err)
			}
			return printAction(cmd, o, verb, ans)
		}),
	}
	sel.register(cmd, &f)
	cmd.Flags().IntVar(&f.Limit, "batch", 500, "jobs a request changes, with selecting flags (at most 1000)")
	return cmd
}

// actOnIDs acts on each job named and prints the jobs as they are after
// it (a delete prints what it deleted).
func actOnIDs(cmd *cobra.Command, o *clientOpts, c *client.Client, verb string, ids []string) error {
	act := map[string]func(*client.Client, context.Context, string) (client.Job, error){
		client.ActionCancel: (*client.Client).Cancel, client.ActionRetry: (*client.Client).Retry,
		client.ActionRun: (*client.Client).RunNow,
	}[verb]
	var (
		jobs    []client.Job
		deleted []string
		errs    []error
	)
	for _, id := range ids {
		if act == nil {
			if err := c.Delete(cmd.Context(), id); err != nil {
				errs = append(errs, fmt.Errorf("%s job %s: %w", verb, id, err))
				continue
			}
			deleted = append(deleted, id)
			continue
		}
		j, err := act(c, cmd.Context(), id)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s job %s: %w", verb, id, err))
			continue
		}
		jobs = append(jobs, j)
	}
	var err error
	switch {
	case o.json && act == nil:
		err = printJSON(cmd.OutOrStdout(), map[string][]string{"deleted": deleted})
	case o.json:
		err = printJSON(cmd.OutOrStdout(), map[string][]client.Job{"jobs": jobs})
	case len(deleted) > 0:
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted jobs %s\n", strings.Join(deleted, " "))
	case len(jobs) > 0:
		err = printJobs(cmd, jobs)
	}
	return errors.Join(append([]error{err}, errs...)...)
}

// printAction prints what a bulk action did; jobs it could not change
// make the command fail.
func printAction(cmd *cobra.Command, o *clientOpts, verb string, ans client.ActionAnswer) error {
	if o.json {
		if err := printJSON(cmd.OutOrStdout(), ans); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d of %d jobs\n", verb, ans.Changed, ans.Matched)
	}
	errs := make([]error, len(ans.Errors))
	for i, e := range ans.Errors {
		errs[i] = fmt.Errorf("%s job %s: %s", verb, e.ID, e.Error)
	}
	return errors.Join(errs...)
}
