package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/client"
)

func newStatsCommand() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show queues, keys, groups, tiers, agents and counters",
		Long: `stats shows what the scheduler is doing: per queue the ready (queued),
running, waiting and delayed jobs and how many of the ready ones a key, group
or read/write gate holds back (and which); per key and group the running jobs
against the limit; per duration tier and agent the slots in use; and the
counters since the server started.`,
		Example: "  usher stats\n  usher stats --json | jq .counters",
		Args:    cobra.NoArgs,
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, _ []string) error {
			s, err := c.Stats(cmd.Context())
			if err != nil {
				return fmt.Errorf("reading stats: %w", err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), s)
			}
			return printStats(cmd.OutOrStdout(), s)
		}),
	}
	o.register(cmd)
	return cmd
}

func printStats(w io.Writer, s client.Stats) error {
	t := newTable(w, "QUEUE", "QUEUED", "RUNNING", "WAITING", "DELAYED", "BLOCKED", "BLOCKED BY")
	for _, q := range s.Queues {
		t.row(q.Name, q.Queued, q.Running, q.Waiting, q.Delayed, q.Blocked, blockedBy(q.BlockedBy))
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, sec := range []struct {
		head string
		rows []client.KeyStats
	}{{"KEY", s.Keys}, {"GROUP", s.Groups}} {
		if len(sec.rows) == 0 {
			continue
		}
		fmt.Fprintln(w)
		t = newTable(w, sec.head, "RUNNING", "LIMIT", "QUEUED", "TOKENS")
		for _, k := range sec.rows {
			t.row(k.Key, k.Running, k.Limit, k.Queued, keyTokens(k))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	t = newTable(w, "TIER", "DURATION", "RUNNING", "COUNTED", "LIMIT")
	for _, tr := range s.Tiers {
		t.row(tr.Name, millis(tr.DurationMs), tr.Running, tr.Counted, tr.Limit)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "AGENT", "SLOTS", "RUNNING")
	for _, a := range s.Agents {
		t.row(a.ID, a.Slots, a.Running)
	}
	if err := t.flush(); err != nil {
		return err
	}
	c := s.Counters
	_, err := fmt.Fprintf(w, "\nstarted %d, succeeded %d, failed %d, retried %d, cancelled %d, downgrades %d, lease expiries %d, snoozed %d, timed out %d, expired %d\n",
		c.Started, c.Succeeded, c.Failed, c.Retried, c.Cancelled, c.Downgrades, c.LeaseExpiries, c.Snoozed, c.TimedOut, c.Expired)
	return err
}

// blockedBy shows the gates holding jobs back, most first.
func blockedBy(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ",")
}

func newTokenCommand() *cobra.Command {
	o := &clientOpts{}
	return group(o, "token", "Create, list and delete API tokens (admin)",
		`token manages the API tokens (admin). A token has one role: admin (everything),
client (submit, read, cancel and retry jobs; read queues, limits and stats) or
agent (lease and report jobs; read jobs). The server keeps only a hash: the
token itself is shown once, when it is created.`,
		tokenCreateCommand(o), tokenListCommand(o), tokenRemoveCommand(o))
}

func tokenCreateCommand(o *clientOpts) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a token and print it (once)",
		Example: `  usher token create scanner-7 --role agent
  USHER_TOKEN=$(usher token create ci --role client --json | jq -r .token)`,
		Args: cobra.ExactArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			tok, err := c.CreateToken(cmd.Context(), args[0], role)
			if err != nil {
				return fmt.Errorf("creating token %s: %w", args[0], err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), tok)
			}
			t := newTable(cmd.OutOrStdout(), "id:", tok.ID)
			t.row("name:", tok.Name)
			t.row("role:", tok.Role)
			t.row("token:", tok.Secret)
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "the token is shown only now: keep it")
			return nil
		}),
	}
	cmd.Flags().StringVar(&role, "role", client.RoleClient, "admin, client or agent")
	return cmd
}

func tokenListCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the tokens (without their secrets)",
		Example: "  usher token ls",
		Args:    cobra.NoArgs,
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, _ []string) error {
			toks, err := c.Tokens(cmd.Context())
			if err != nil {
				return fmt.Errorf("listing tokens: %w", err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"tokens": toks})
			}
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "ROLE", "CREATED")
			for _, tok := range toks {
				t.row(tok.ID, tok.Name, tok.Role, when(tok.CreatedAt.Time))
			}
			return t.flush()
		}),
	}
}

func tokenRemoveCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"delete"},
		Short:   "Delete tokens (a token cannot delete itself)",
		Example: "  usher token rm 4",
		Args:    cobra.MinimumNArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			for _, id := range args {
				if err := c.DeleteToken(cmd.Context(), id); err != nil {
					return fmt.Errorf("deleting token %s: %w", id, err)
				}
			}
			return printDeleted(cmd, o, "token", args)
		}),
	}
}

// printDeleted confirms deletions: a line each, or {"deleted": [...]}.
func printDeleted(cmd *cobra.Command, o *clientOpts, what string, names []string) error {
	if o.json {
		return printJSON(cmd.OutOrStdout(), map[string][]string{"deleted": names})
	}
	for _, n := range names {
		fmt.Fprintf(cmd.OutOrStdout(), "deleted %s %s\n", what, n)
	}
	return nil
}

// keyTokens shows a rated key's bucket: its tokens, and when it is not full
// how soon the next one is due; "-" for a key without a rate.
func keyTokens(k client.KeyStats) string {
	if k.Tokens == nil {
		return "-"
	}
	s := strconv.Itoa(*k.Tokens)
	if k.NextToken != nil {
		s += fmt.Sprintf(" (next in %s)", max(0, time.Until(*k.NextToken)).Round(time.Millisecond))
	}
	return s
}
