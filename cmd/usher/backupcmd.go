package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/internal/sqlitedb"
)

func newBackupCommand() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "backup --data FILE DEST",
		Short: "Copy the data file of usher serve, safely while it runs",
		Long: `backup writes a consistent copy of usher serve's SQLite file (--data) to
the new file DEST: every transaction committed when it starts, including
those still in the write-ahead log, and nothing half-written. It is safe
while usher serve runs and does not block it. DEST must not exist (a backup
is never overwritten); the copy appears under its name only when complete,
with mode 0600. The copy is then checked with SQLite's integrity check.

Restore: stop usher serve, remove the data file's -wal and -shm files, put
the copy in place of the data file, start usher serve. See
docs/operations.md, "Backups: what lives where".`,
		Example: `  usher backup --data /var/lib/usher/usher.db /var/backups/usher-$(date +%F).db
  docker exec usher usher backup --data /var/lib/usher/usher.db /var/lib/usher/backup.db`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, dest := cmd.Context(), args[0]
			if data == "" {
				return errors.New("backup: give --data FILE, usher serve's SQLite file")
			}
			if _, err := os.Stat(data); err != nil { // opening would create an empty file
				return fmt.Errorf("backup: --data: %w", err)
			}
			db, err := sqlitedb.Open(ctx, data)
			if err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			defer db.Close()
			if err := sqlitedb.Backup(ctx, db, dest); err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			if err := sqlitedb.Verify(ctx, dest); err != nil {
				return fmt.Errorf("backup: the copy %s is damaged; keep the previous backup: %w", dest, err)
			}
			info, err := os.Stat(dest)
			if err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s (%d bytes, integrity ok)\n", data, dest, info.Size())
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the SQLite file of usher serve (required)")
	return cmd
}
