package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/client"
)

// defaultServer is the address the client commands call when neither
// --server nor $USHER_SERVER names one.
const defaultServer = "http://localhost:8080"

// adminTokenFile is read, from the current directory, when neither --token
// nor $USHER_TOKEN gives a token: usher serve writes it beside its data
// file on its first start.
const adminTokenFile = "usher-admin.token"

// clientOpts are the flags every client command shares: where the server
// is, the token, and whether to print JSON.
type clientOpts struct {
	server, token string
	json          bool
}

// register adds the shared flags to cmd and its subcommands.
func (o *clientOpts) register(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.server, "server", defaultServer, "address of the usher server [$USHER_SERVER]")
	f.StringVar(&o.token, "token", "", "API token (default $USHER_TOKEN, else the file ./"+adminTokenFile+")")
	f.BoolVar(&o.json, "json", false, "print the server's answer as JSON instead of a table")
}

// resolve fills in the server and token from the environment and the
// token file where no flag gave them.
func (o *clientOpts) resolve(cmd *cobra.Command) error {
	if f := cmd.Flags().Lookup("server"); f != nil && !f.Changed {
		if v := os.Getenv("USHER_SERVER"); v != "" {
			o.server = v
		}
	}
	if f := cmd.Flags().Lookup("token"); f != nil && f.Changed {
		return nil
	}
	if v := os.Getenv("USHER_TOKEN"); v != "" {
		o.token = v
		return nil
	}
	b, err := os.ReadFile(adminTokenFile)
	switch {
	case err == nil:
		o.token = strings.TrimSpace(string(b))
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("reading the token file %s: %w", adminTokenFile, err)
	}
	return nil
}

// client returns the API client the flags describe.
func (o *clientOpts) client(cmd *cobra.Command) (*client.Client, error) {
	if err := o.resolve(cmd); err != nil {
		return nil, err
	}
	if !strings.Contains(o.server, "://") {
		o.server = "http://" + o.server
	}
	return client.New(o.server, o.token), nil
}

// explain adds to err what a user can do about it: how to pass a token for
// a 401, which role for a 403, which address was tried when the server
// could not be reached.
func (o *clientOpts) explain(err error) error {
	if err == nil {
		return nil
	}
	var netErr *net.OpError
	switch {
	case client.StatusOf(err) == 401 && o.token == "":
		return fmt.Errorf("%w\nno token was given: pass one with --token or $USHER_TOKEN, or run in the directory of %s (usher serve writes an admin token there on its first start)", err, adminTokenFile)
	case client.StatusOf(err) == 401:
		return fmt.Errorf("%w\nthe server at %s does not know this token: check --token or $USHER_TOKEN (an admin makes tokens with `usher token create`)", err, o.server)
	case client.StatusOf(err) == 403:
		return fmt.Errorf("%w\nthis token's role may not do that: use an admin token, or one made with `usher token create NAME --role admin|client|agent`", err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the usher server at %s: connection refused (is `usher serve` running there? name another address with --server or $USHER_SERVER)", o.server)
	case errors.As(err, &netErr):
		return fmt.Errorf("cannot reach the usher server at %s: %w (name another address with --server or $USHER_SERVER)", o.server, err)
	}
	return err
}

// withClient makes a RunE that calls run with the API client, explaining
// the errors it returns.
func withClient(o *clientOpts, run func(cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := o.client(cmd)
		if err != nil {
			return err
		}
		return o.explain(run(cmd, c, args))
	}
}

// group makes a command that only holds subcommands and the shared flags.
func group(o *clientOpts, use, short, long string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.NoArgs}
	o.register(cmd)
	cmd.AddCommand(subs...)
	return cmd
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("printing JSON: %w", err)
	}
	return nil
}

// table writes rows under a header, aligned in columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(toAny(header)...)
	return t
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprintln(t.tw)
}

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("printing a table: %w", err)
	}
	return nil
}

// orDash shows an empty value as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// list joins values with commas, "-" for none.
func list(v []string) string { return orDash(strings.Join(v, ",")) }

// when shows a time in the local zone to the second, "-" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// whenSet shows a time that may not be reached yet (nil), as when does.
func whenSet(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return when(*t)
}

// millis shows a count of milliseconds as a duration.
func millis(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}
