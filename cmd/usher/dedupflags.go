package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/client"
)

// dedupFlags are a job's idempotency key and unique options on the
// command line (docs/api.md, "Idempotent enqueue and unique jobs").
type dedupFlags struct {
	key          string
	unique       bool
	byArgs       bool
	period       time.Duration
	uniqueStates []string
}

func (d *dedupFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&d.key, "idempotency-key", "", "enqueue at most once with this key while the server keeps it (24 h by default)")
	f.BoolVar(&d.unique, "unique", false, "a unique job: none is created while one of the same queue is unfinished")
	f.BoolVar(&d.byArgs, "unique-by-args", false, "a unique job by queue and payload (implies --unique)")
	f.DurationVar(&d.period, "unique-period", 0, "a unique job within periods of this length (implies --unique)")
	f.StringSliceVar(&d.uniqueStates, "unique-states", nil, "the states in which a job alike counts (default: every unfinished state)")
}

// apply sets the flags' fields in s.
func (d *dedupFlags) apply(cmd *cobra.Command, s *client.JobSpec) error {
	f := cmd.Flags()
	if f.Changed("idempotency-key") {
		if d.key == "" {
			return errors.New("--idempotency-key is empty")
		}
		s.IdempotencyKey = d.key
	}
	if d.unique || d.byArgs || f.Changed("unique-period") || f.Changed("unique-states") {
		if d.period < 0 {
			return fmt.Errorf("--unique-period %s is negative", d.period)
		}
		s.Unique = &client.UniqueOpts{ByArgs: d.byArgs, ByPeriodMs: d.period.Milliseconds()}
		for _, st := range d.uniqueStates {
			s.Unique.States = append(s.Unique.States, client.State(st))
		}
	}
	return nil
}

// printAnswer prints the ids of an enqueue, one a line, and for each job
// that existed before a note on standard error. With --json it prints
// the answer as the API gives it.
func printAnswer(cmd *cobra.Command, o *clientOpts, ans client.EnqueueAnswer) error {
	if o.json {
		return printJSON(cmd.OutOrStdout(), ans)
	}
	var b strings.Builder
	for i, id := range ans.IDs {
		b.WriteString(id)
		b.WriteByte('\n')
		if i < len(ans.Existing) && ans.Existing[i] {
			fmt.Fprintf(cmd.ErrOrStderr(), "job %s existed already (same idempotency key, or a unique job alike): not created again\n", id)
		}
	}
	_, err := io.WriteString(cmd.OutOrStdout(), b.String())
	return err
}
