package main

import (
	"context"
	"errors"
	"fmt"
	"os"

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
	cmd.AddCommand(shareDeleteCommand(o))
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

// open opens the store the flags name; deleting needs none of the
// shares' limits.
func (o *shareStoreFlags) open(ctx context.Context) (shares.Store, func(), error) {
	switch {
	case (o.data == "") == (o.redisURL == ""):
		return nil, nil, errors.New("share: give either --data FILE (usher serve's SQLite file) or --redis URL (multi-node mode)")
	case o.redisURL != "":
		rdb, err := redisq.Open(ctx, o.redisURL, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("share: %w", err)
		}
		return shares.NewRedis(rdb, redisq.NewKeys(o.prefix), shares.Config{}), func() { rdb.Close() }, nil
	default:
		if _, err := os.Stat(o.data); err != nil { // opening would create an empty file
			return nil, nil, fmt.Errorf("share: --data: %w", err)
		}
		db, err := sqlitedb.Open(ctx, o.data)
		if err != nil {
			return nil, nil, fmt.Errorf("share: %w", err)
		}
		store, err := shares.OpenSQLite(ctx, db, shares.Config{})
		if err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("share: %w", err)
		}
		return store, func() { db.Close() }, nil
	}
}
