package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/shares"
	"github.com/usherhq/usher/internal/sqlitedb"
)

// shareStoreFlags name the store of shares an operator command works on:
// the data file of `usher serve`, or the Redis of multi-node mode.
type shareStoreFlags struct {
	data, redisURL, prefix string
}

// operatorLimits let through any share a server once accepted.
var operatorLimits = shares.Config{MaxFiles: math.MaxInt, MaxBytes: math.MaxInt64}

func newShareCommand() *cobra.Command {
	o := &shareStoreFlags{}
	cmd := &cobra.Command{
		Use:   "share",
		Short: "Manage shared projects (operator)",
		Long: `share works on the store of shared projects directly: the SQLite file of
'usher serve' (--data) or, in multi-node mode, Redis (--redis). It needs no
running server. See docs/operations.md, "Shares".`,
	}
	cmd.PersistentFlags().StringVar(&o.data, "data", "", "the SQLite file of usher serve")
	cmd.PersistentFlags().StringVar(&o.redisURL, "redis", "", "the Redis of multi-node mode (redis://host:port, ?cluster=true or ?master=NAME)")
	cmd.PersistentFlags().StringVar(&o.prefix, "redis-prefix", redisq.DefaultPrefix, "prefix of every Redis key, as usher serve --redis-prefix")
	cmd.AddCommand(shareDeleteCommand(o), shareCopyCommand(o))
	return cmd
}

func shareDeleteCommand(o *shareStoreFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID...",
		Short: "Delete shares for good: their links then answer 410 Gone",
		Example: `  usher share delete 3q2-7wEjEr1VGMbX-JbU2Q --data /var/lib/usher/usher.db
  usher share delete 3q2-7wEjEr1VGMbX-JbU2Q --redis redis://redis:6379`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, closeStore, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			for _, id := range args {
				switch err := store.Delete(cmd.Context(), id); {
				case errors.Is(err, shares.ErrBadID):
					return fmt.Errorf("share delete: %q is not a share id (%d characters of base64url)", id, shares.IDLength)
				case errors.Is(err, shares.ErrNotFound):
					return fmt.Errorf("share delete: no share %q (never made, or already expired or deleted)", id)
				case err != nil:
					return fmt.Errorf("share delete %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted share %s\n", id)
			}
			return nil
		},
	}
}

// open opens the store the flags name. An operator's command applies
// none of the server's limits: it deletes, or copies shares that a
// server accepted.
func (o *shareStoreFlags) open(ctx context.Context) (shares.Store, func(), error) {
	switch {
	case (o.data == "") == (o.redisURL == ""):
		return nil, nil, errors.New("share: give either --data FILE (usher serve's SQLite file) or --redis URL (multi-node mode)")
	case o.redisURL != "":
		return o.openRedis(ctx)
	default:
		return o.openSQLite(ctx)
	}
}

func (o *shareStoreFlags) openRedis(ctx context.Context) (*shares.Redis, func(), error) {
	rdb, err := redisq.Open(ctx, o.redisURL, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("share: %w", err)
	}
	return shares.NewRedis(rdb, redisq.NewKeys(o.prefix), operatorLimits), func() { rdb.Close() }, nil
}

func (o *shareStoreFlags) openSQLite(ctx context.Context) (*shares.SQLite, func(), error) {
	if _, err := os.Stat(o.data); err != nil { // opening would create an empty file
		return nil, nil, fmt.Errorf("share: --data: %w", err)
	}
	db, err := sqlitedb.Open(ctx, o.data)
	if err != nil {
		return nil, nil, fmt.Errorf("share: %w", err)
	}
	store, err := shares.OpenSQLite(ctx, db, operatorLimits)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("share: %w", err)
	}
	return store, func() { db.Close() }, nil
}

func shareCopyCommand(o *shareStoreFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "copy",
		Short: "Copy every share of a data file into Redis, for moving to multi-node mode",
		Long: `copy reads every kept share of usher serve's SQLite file (--data) and
stores it in Redis (--redis, --redis-prefix), with its last open, so that
share links made before the move keep working on every queue server. Shares
already in Redis stay; the quota is not applied. Run it again at any time:
it only adds what is missing.`,
		Example: `  usher share copy --data /var/lib/usher/usher.db --redis redis://redis:6379`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.data == "" || o.redisURL == "" {
				return errors.New("share copy: give both --data FILE (from) and --redis URL (to)")
			}
			from, closeFrom, err := o.openSQLite(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFrom()
			to, closeTo, err := o.openRedis(cmd.Context())
			if err != nil {
				return err
			}
			defer closeTo()
			var copied, present int
			err = from.Each(cmd.Context(), func(files []shares.File, opened time.Time) error {
				_, created, err := to.Import(cmd.Context(), files, opened)
				if created {
					copied++
				} else if err == nil {
					present++
				}
				return err
			})
			fmt.Fprintf(cmd.OutOrStdout(), "copied %d shares; %d were in Redis already\n", copied, present)
			if err != nil {
				return fmt.Errorf("share copy: %w", err)
			}
			return nil
		},
	}
}
