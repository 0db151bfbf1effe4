package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Backup writes a copy of the database db to the new file dest, safe while
// other connections and processes read and write it. It guarantees:
//
//   - The copy is transactionally consistent: it holds exactly the
//     transactions committed when the copy began, including those still in
//     the write-ahead log, and none of the writes that come later or are
//     uncommitted (SQLite's VACUUM INTO reads one snapshot). It is compacted
//     (no free pages) and needs no -wal file beside it.
//   - An existing dest is never overwritten: Backup refuses it with an error
//     that names it, and leaves it as it was.
//   - dest appears whole or not at all: the copy is written to a temporary
//     file in dest's directory, flushed to stable storage, and only then
//     given the name dest (the directory is flushed too). After a crash or
//     an error there is at most a leftover ".usher-backup-*" file, never a
//     partial file named dest.
//
// The copy has mode 0600: it holds everything the data file holds.
// Writers are not blocked while it runs (WAL mode); ctx cancels it.
func Backup(ctx context.Context, db *sql.DB, dest string) error {
	abs, err := filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("sqlitedb: backup to %s: %w", dest, err)
	}
	if err := refuseExisting(dest); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), ".usher-backup-*")
	if err != nil {
		return fmt.Errorf("sqlitedb: backup to %s: %w", dest, err)
	}
	tmp.Close()
	done := false
	defer func() {
		if !done {
			os.Remove(tmp.Name())
		}
	}()
	// VACUUM INTO takes an empty file as a new one. The path is absolute,
	// so SQLite never reads it as a "file:" URI.
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp.Name()); err != nil {
		return fmt.Errorf("sqlitedb: backup to %s: %w", dest, err)
	}
	if err := syncPath(tmp.Name()); err != nil {
		return fmt.Errorf("sqlitedb: backup to %s: %w", dest, err)
	}
	if err := publish(tmp.Name(), dest); err != nil {
		return err
	}
	done = true
	if err := syncPath(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("sqlitedb: backup to %s: the copy is complete, but flushing its directory failed: %w", dest, err)
	}
	return nil
}

// refuseExisting returns the error for a dest that exists already.
func refuseExisting(dest string) error {
	switch _, err := os.Lstat(dest); {
	case err == nil:
		return fmt.Errorf("sqlitedb: backup: %s exists; give a new file name (a backup is never overwritten)", dest)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sqlitedb: backup to %s: %w", dest, err)
	}
	return nil
}

// publish gives the complete copy tmp the name dest. A hard link fails
// when dest has appeared meanwhile, where a rename would replace it; on a
// file system without hard links it renames after checking again.
func publish(tmp, dest string) error {
	err := os.Link(tmp, dest)
	switch {
	case err == nil:
		os.Remove(tmp)
		return nil
	case errors.Is(err, fs.ErrExist):
		return refuseExisting(dest)
	}
	if err := refuseExisting(dest); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("sqlitedb: backup to %s: %w", dest, err)
	}
	return nil
}

// syncPath flushes a file or directory to stable storage.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Verify opens the SQLite file at path read-only, changing nothing in it
// or beside it, and runs SQLite's full integrity check. It returns nil
// when the check answers "ok", else an error with what it found.
func Verify(ctx context.Context, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("sqlitedb: verify %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil { // opening would create it
		return fmt.Errorf("sqlitedb: verify: %w", err)
	}
	// immutable: no locks and no -wal/-shm files; a backup has no writers.
	u := url.URL{Scheme: "file", Path: abs, RawQuery: "mode=ro&immutable=1"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return fmt.Errorf("sqlitedb: verify %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return fmt.Errorf("sqlitedb: verify %s: integrity check: %w", path, err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("sqlitedb: verify %s: integrity check: %w", path, err)
		}
		found = append(found, line)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlitedb: verify %s: integrity check: %w", path, err)
	}
	if len(found) != 1 || found[0] != "ok" {
		return fmt.Errorf("sqlitedb: verify %s: integrity check failed: %s", path, strings.Join(found, "; "))
	}
	return nil
}
