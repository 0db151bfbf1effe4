// Package sqlitedb opens usher's SQLite file: the embedded default's durable
// state. It sets the pragmas every user of the file relies on and applies
// each package's schema migrations in order. Backup copies it while it is
// in use; Verify checks a copy.
//
// The driver is modernc.org/sqlite, a translation of SQLite to Go: no cgo,
// so the one binary builds and cross-compiles with the plain Go toolchain.
package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Open opens (creating if needed) the SQLite file at path with write-ahead
// logging, a busy timeout and foreign keys on. ":memory:" is refused: each
// pooled connection would get its own empty database.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("sqlitedb: need a file path, got %q", path)
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "synchronous(NORMAL)", "foreign_keys(ON)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: open %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitedb: open %s: %w", path, err)
	}
	return db, nil
}

// Migrate brings the schema named name up to date: it runs the statements
// of steps that have not run yet, each step in its own transaction, and
// records how many have run. Steps are only ever appended, never edited.
func Migrate(ctx context.Context, db *sql.DB, name string, steps []string) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_versions (
		name TEXT PRIMARY KEY, version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlitedb: migrate %s: %w", name, err)
	}
	var done int
	err := db.QueryRowContext(ctx, `SELECT version FROM schema_versions WHERE name = ?`, name).Scan(&done)
	if err != nil && err != sql.ErrNoRows {
		return fmt.Errorf("sqlitedb: migrate %s: %w", name, err)
	}
	if done > len(steps) {
		return fmt.Errorf("sqlitedb: schema %s is at version %d, newer than this binary knows (%d)", name, done, len(steps))
	}
	for i := done; i < len(steps); i++ {
		if err := applyStep(ctx, db, name, i+1, steps[i]); err != nil {
			return err
		}
	}
	return nil
}

func applyStep(ctx context.Context, db *sql.DB, name string, version int, stmt string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitedb: migrate %s to %d: %w", name, version, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("sqlitedb: migrate %s to %d: %w", name, version, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_versions (name, version) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET version = excluded.version`, name, version); err != nil {
		return fmt.Errorf("sqlitedb: migrate %s to %d: %w", name, version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitedb: migrate %s to %d: %w", name, version, err)
	}
	return nil
}
