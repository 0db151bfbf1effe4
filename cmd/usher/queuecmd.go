package main

import (
	"fmt"
	"github.com/usherhq/usher/jobtype"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/usherhq/usher/client"
)

func newQueueCommand() *cobra.Command {
	o := &clientOpts{}
	return group(o, "queue", "Create, list, change and delete queues of generic jobs",
		`queue manages the queues of generic jobs (docs/api.md, Queues). A queue has a
priority (higher is served first), capabilities an agent must offer to get
its jobs, an order (fifo, strict or random), a batch cap per lease, an active
flag (a paused queue takes jobs and starts none) and a retry policy for jobs
that set none. Changing queues needs an admin token.`,
		queueCreateCommand(o), queueListCommand(o), queueShowCommand(o), queueUpdateCommand(o),
		queueRemoveCommand(o), queueFlushCommand(o))
}

// queueFlags are the settings of a queue as flags, shared by create and
// update.
type queueFlags struct {
	priority, batch, maxAttempts int
	requires                     []string
	order, backoffPolicy         string
	active, strictStart          bool
	backoff, maxBackoff          time.Duration
}

func (q *queueFlags) register(f *pflag.FlagSet, forUpdate bool) {
	f.IntVar(&q.priority, "priority", 0, "higher is served first")
	f.StringSliceVar(&q.requires, "requires", nil, "capability an agent must offer (repeatable, or comma-separated)")
	f.StringVar(&q.order, "order", "fifo", "fifo (first admissible job), strict (only the head may start) or random")
	f.IntVar(&q.batch, "batch", 0, "most jobs one lease takes from this queue (0: no cap)")
	f.BoolVar(&q.strictStart, "strict-start", false, "strict queues: hand out the next job only once the agent holding the previous one confirmed it started")
	if forUpdate {
		f.BoolVar(&q.active, "active", true, "false pauses the queue (it takes jobs, starts none); true resumes it")
	} else {
		f.BoolVar(&q.active, "active", true, "--active=false creates the queue paused")
	}
	f.IntVar(&q.maxAttempts, "max-attempts", 0, "retry policy: attempts of a job that sets none (0: one)")
	f.DurationVar(&q.backoff, "backoff", 0, "retry policy: the backoff's base, the wait after the first attempt")
	f.DurationVar(&q.maxBackoff, "max-backoff", 0, "retry policy: longest wait between attempts")
	f.StringVar(&q.backoffPolicy, "backoff-policy", client.BackoffExponential,
		"retry policy: how the wait grows: exponential (base·2^(n-1), randomized with full jitter), linear (base·n) or constant")
}

// backoffFlags are the flags of a retry policy's backoff.
var backoffFlags = []string{"backoff", "max-backoff", "backoff-policy"}

// changedAny says whether any of the flags was given.
func changedAny(f *pflag.FlagSet, names ...string) bool {
	for _, n := range names {
		if f.Changed(n) {
			return true
		}
	}
	return false
}

// retry is the retry policy the flags give, nil when none is set.
func (q *queueFlags) retry(f *pflag.FlagSet) *client.RetryPolicy {
	if !changedAny(f, append(backoffFlags, "max-attempts")...) {
		return nil
	}
	r := &client.RetryPolicy{MaxAttempts: q.maxAttempts}
	if changedAny(f, backoffFlags...) {
		r.Backoff = &client.Backoff{Policy: q.backoffPolicy, BaseMs: q.backoff.Milliseconds(), MaxMs: q.maxBackoff.Milliseconds()}
	}
	return r
}

func queueCreateCommand(o *clientOpts) *cobra.Command {
	q := &queueFlags{}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a queue",
		Long:  "create makes a queue (admin). NAME is 1-128 characters of A-Z a-z 0-9 . _ -.",
		Example: `  usher queue create scan --priority 10 --requires net --order random --batch 2
  usher queue create etl --max-attempts 3 --backoff 1s --max-backoff 1m
  usher queue create later --active=false
  usher queue create deploy --order strict --strict-start`,
		Args: cobra.ExactArgs(1),
	}
	q.register(cmd.Flags(), false)
	cmd.RunE = withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
		spec := client.QueueSpec{Name: args[0], Priority: q.priority, Requires: q.requires, Batch: q.batch,
			Retry: q.retry(cmd.Flags())}
		if cmd.Flags().Changed("order") {
			spec.Order = q.order
		}
		if cmd.Flags().Changed("active") {
			spec.Active = &q.active
		}
		spec.StrictStart = q.strictStart
		got, err := c.CreateQueue(cmd.Context(), spec)
		if err != nil {
			return fmt.Errorf("creating queue %s: %w", args[0], err)
		}
		return printQueues(cmd, o, got)
	})
	return cmd
}

func queueUpdateCommand(o *clientOpts) *cobra.Command {
	q := &queueFlags{}
	cmd := &cobra.Command{
		Use:   "update NAME",
		Short: "Change some settings of a queue",
		Long: `update changes the settings given as flags and leaves the others (admin).
A retry flag changes that field of the queue's retry policy only.`,
		Example: `  usher queue update scan --priority 20
  usher queue update scan --active=false     # pause
  usher queue update scan --active           # resume
  usher queue update scan --requires net,ipv6 --max-attempts 5
  usher queue update deploy --strict-start=false`,
		Args: cobra.ExactArgs(1),
	}
	q.register(cmd.Flags(), true)
	cmd.RunE = withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
		u, err := q.update(cmd, c, args[0])
		if err != nil {
			return err
		}
		got, err := c.UpdateQueue(cmd.Context(), args[0], u)
		if err != nil {
			return fmt.Errorf("updating queue %s: %w", args[0], err)
		}
		return printQueues(cmd, o, got)
	})
	return cmd
}

// update is the change the given flags ask for; a retry flag is merged
// into the queue's current policy.
func (q *queueFlags) update(cmd *cobra.Command, c *client.Client, name string) (client.QueueUpdate, error) {
	f := cmd.Flags()
	var u client.QueueUpdate
	if f.Changed("priority") {
		u.Priority = &q.priority
	}
	if f.Changed("requires") {
		u.Requires = &q.requires
	}
	if f.Changed("order") {
		u.Order = &q.order
	}
	if f.Changed("batch") {
		u.Batch = &q.batch
	}
	if f.Changed("active") {
		u.Active = &q.active
	}
	if f.Changed("strict-start") {
		u.StrictStart = &q.strictStart
	}
	if q.retry(f) == nil {
		return u, nil
	}
	cur, err := c.Queue(cmd.Context(), name)
	if err != nil {
		return u, fmt.Errorf("reading queue %s: %w", name, err)
	}
	r := cur.Retry
	if f.Changed("max-attempts") {
		r.MaxAttempts = q.maxAttempts
	}
	if changedAny(f, backoffFlags...) {
		b := client.Backoff{Policy: client.BackoffExponential, BaseMs: r.BackoffMs, MaxMs: r.MaxBackoffMs}
		if r.Backoff != nil {
			b = *r.Backoff
		}
		if f.Changed("backoff") {
			b.BaseMs = q.backoff.Milliseconds()
		}
		if f.Changed("max-backoff") {
			b.MaxMs = q.maxBackoff.Milliseconds()
		}
		if f.Changed("backoff-policy") {
			b.Policy = q.backoffPolicy
		}
		r.Backoff, r.BackoffMs, r.MaxBackoffMs = &b, 0, 0
	}
	u.Retry = &r
	return u, nil
}

func queueListCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the queues",
		Example: "  usher queue ls\n  usher queue ls --json | jq '.queues[].name'",
		Args:    cobra.NoArgs,
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, _ []string) error {
			qs, err := c.Queues(cmd.Context())
			if err != nil {
				return fmt.Errorf("listing queues: %w", err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"queues": qs})
			}
			return printQueues(cmd, o, qs...)
		}),
	}
}

func queueShowCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "show NAME",
		Short:   "Show a queue's settings",
		Example: "  usher queue show scan",
		Args:    cobra.ExactArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			q, err := c.Queue(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("reading queue %s: %w", args[0], err)
			}
			return printQueues(cmd, o, q)
		}),
	}
}

func queueRemoveCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete"},
		Short:   "Delete queues, cancelling their queued jobs",
		Long: `rm deletes queues (admin). Their queued jobs are cancelled, with their
dependants; a queue with running jobs is refused (flush it and wait, or
cancel its running jobs first).`,
		Example: "  usher queue rm scan",
		Args:    cobra.MinimumNArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			for _, name := range args {
				if err := c.DeleteQueue(cmd.Context(), name); err != nil {
					return fmt.Errorf("deleting queue %s: %w", name, err)
				}
			}
			return printDeleted(cmd, o, "queue", args)
		}),
	}
}

func queueFlushCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "flush NAME",
		Short:   "Cancel every queued job of a queue",
		Long:    "flush cancels a queue's queued jobs (admin); a queue with running jobs is refused.",
		Example: "  usher queue flush scan",
		Args:    cobra.ExactArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			n, err := c.FlushQueue(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("flushing queue %s: %w", args[0], err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string]int{"cancelled": n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cancelled %d queued jobs of %s\n", n, args[0])
			return nil
		}),
	}
}

// printQueues prints queues as a table, or one queue as JSON with --json.
func printQueues(cmd *cobra.Command, o *clientOpts, qs ...client.Queue) error {
	if o.json && len(qs) == 1 {
		return printJSON(cmd.OutOrStdout(), qs[0])
	}
	t := newTable(cmd.OutOrStdout(), "NAME", "PRIORITY", "ORDER", "BATCH", "ACTIVE", "REQUIRES", "RETRY")
	for _, q := range qs {
		order := q.Order
		if q.StrictStart {
			order += "-start" // strict-start
		}
		t.row(q.Name, q.Priority, order, q.Batch, q.Active, list(q.Requires), retryText(q.Retry))
	}
	return t.flush()
}

// retryText shows a retry policy in one cell.
func retryText(r client.RetryPolicy) string {
	if r.MaxAttempts <= 1 {
		return "once"
	}
	s := strconv.Itoa(r.MaxAttempts) + " attempts"
	b := r.Backoff
	if b == nil {
		b = &client.Backoff{BaseMs: r.BackoffMs, MaxMs: r.MaxBackoffMs}
	}
	if b.BaseMs > 0 {
		s += ", backoff " + millis(b.BaseMs)
		if b.Policy != "" && b.Policy != client.BackoffExponential {
			s += " " + b.Policy
		}
	}
	if b.MaxMs > 0 {
		s += " up to " + millis(b.MaxMs)
	}
	return s
}

func newLimitCommand() *cobra.Command {
	o := &clientOpts{}
	return group(o, "limit", "Set and list key limits",
		`limit manages key limits: a key such as net:10.1.2.0/24 limits how
many running jobs hold it, across all queues. A pattern ending in * sets the
limit of every key with that prefix; an exact key's own limit wins, then the
longest pattern.`,
		limitSetCommand(o), limitListCommand(o))
}

func limitSetCommand(o *clientOpts) *cobra.Command {
	var rate string
	var burst int
	cmd := &cobra.Command{
		Use:   "set PATTERN [LIMIT] [--rate N/UNIT [--burst N]]",
		Short: "Set the limit and rate of a key or key pattern (0 and no rate removes it)",
		Long: `Set how many jobs holding a key may run at once (LIMIT), how often they
may start (--rate, per second, minute or hour; --burst starts at once when
the bucket is full, default the starts the rate allows in a second, at
least 1), or both. A pattern ending in * sets them
for every key with that prefix, each key on its own. The command replaces
what the pattern had: LIMIT 0 without --rate removes it.`,
		Example: `  usher limit set 'net:*' 5
  usher limit set net:10.1.2.0/24 1
  usher limit set 'api:stripe' --rate 100/s --burst 20
  usher limit set 'api:*' 10 --rate 6000/m
  usher limit set 'net:*' 0      # remove`,
		Args: cobra.RangeArgs(1, 2),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			l := client.KeyLimit{Pattern: args[0], Rate: rate, Burst: burst}
			if len(args) == 2 {
				n, err := strconv.Atoi(args[1])
				if err != nil || n < 0 {
					return fmt.Errorf("LIMIT %q is not a count of jobs (0 removes the limit)", args[1])
				}
				l.Limit = n
			} else if rate == "" {
				return fmt.Errorf("give a LIMIT, a --rate or both")
			}
			if rate != "" {
				if _, _, err := jobtype.ParseRate(rate); err != nil {
					return fmt.Errorf("--rate: %w", err)
				}
			}
			l, err := c.PutKeyLimit(cmd.Context(), l)
			if err != nil {
				return fmt.Errorf("setting limit %s: %w", args[0], err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), l)
			}
			return printLimits(cmd, l)
		}),
	}
	cmd.Flags().StringVar(&rate, "rate", "", "starts allowed per second, minute or hour: 100/s, 6000/m, 10/h")
	cmd.Flags().IntVar(&burst, "burst", 0, "starts allowed at once with a full bucket (with --rate; default: a second's worth, at least 1)")
	return cmd
}

func limitListCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the key limits",
		Example: "  usher limit ls",
		Args:    cobra.NoArgs,
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, _ []string) error {
			ls, err := c.KeyLimits(cmd.Context())
			if err != nil {
				return fmt.Errorf("listing limits: %w", err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"limits": ls})
			}
			return printLimits(cmd, ls...)
		}),
	}
}

func printLimits(cmd *cobra.Command, ls ...client.KeyLimit) error {
	t := newTable(cmd.OutOrStdout(), "PATTERN", "LIMIT", "RATE", "BURST")
	for _, l := range ls {
		rate, burst := "-", "-"
		if l.Rate != "" {
			rate, burst = l.Rate, strconv.Itoa(l.Burst)
		}
		t.row(l.Pattern, l.Limit, rate, burst)
	}
	return t.flush()
}
