package shares

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/sqlitedb"
)

// The shares table. A row whose gone is not empty is a tombstone: the
// share expired or was deleted at gone_at (its files are dropped). Times
// are Unix seconds; size is the stored JSON's length, what the quota
// counts.
var schema = []string{`
CREATE TABLE shares (
	id      TEXT PRIMARY KEY,
	files   TEXT NOT NULL,
	created INTEGER NOT NULL
);`, `
ALTER TABLE shares ADD COLUMN opened INTEGER NOT NULL DEFAULT 0;
ALTER TABLE shares ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE shares ADD COLUMN gone TEXT NOT NULL DEFAULT '';
ALTER TABLE shares ADD COLUMN gone_at INTEGER NOT NULL DEFAULT 0;
UPDATE shares SET opened = created, size = length(CAST(files AS BLOB));
CREATE INDEX shares_opened ON shares (opened) WHERE gone = '';
CREATE INDEX shares_gone_at ON shares (gone_at) WHERE gone != '';`}

// touchEvery is, in seconds, how stale a share's last open may be before
// an open records it: retentions are days, and a read need not write.
const touchEvery = 60

// SQLite keeps shares in usher's SQLite file: the embedded default's store.
type SQLite struct {
	db  *sql.DB
	cfg Config
	// mu serializes this process's writes, so that Put's read of the
	// quota and its insert see no write in between.
	mu sync.Mutex
}

// OpenSQLite prepares the shares table in db.
func OpenSQLite(ctx context.Context, db *sql.DB, cfg Config) (*SQLite, error) {
	if err := sqlitedb.Migrate(ctx, db, "shares", schema); err != nil {
		return nil, err
	}
	return &SQLite{db: db, cfg: cfg.withDefaults()}, nil
}

// MaxBytes is the most content one share may hold.
func (s *SQLite) MaxBytes() int64 { return s.cfg.MaxBytes }

// Put checks and stores files (see Store).
func (s *SQLite) Put(ctx context.Context, files []File) (id string, created bool, err error) {
	id, data, err := s.cfg.encode(files)
	if err != nil {
		return "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", false, fmt.Errorf("shares: put: %w", err)
	}
	defer tx.Rollback()
	if created, err = s.putTx(ctx, tx, id, data); err != nil {
		return "", false, err
	}
	if err := tx.Commit(); err != nil {
		return "", false, fmt.Errorf("shares: put: %w", err)
	}
	return id, created, nil
}

func (s *SQLite) putTx(ctx context.Context, tx *sql.Tx, id string, data []byte) (created bool, err error) {
	now := s.cfg.Now().Unix()
	if _, err := s.expire(ctx, tx, now); err != nil { // a write first: the transaction holds the write lock
		return false, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE shares SET opened = ? WHERE id = ? AND gone = ''`, now, id)
	if err != nil {
		return false, fmt.Errorf("shares: put: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return false, nil // shared before: its age restarts
	}
	size := int64(len(data))
	if s.cfg.Quota > 0 {
		var used int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(size), 0) FROM shares WHERE gone = ''`).Scan(&used); err != nil {
			return false, fmt.Errorf("shares: put: %w", err)
		}
		if used+size > s.cfg.Quota {
			return false, fullError(used, size, s.cfg.Quota)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO shares (id, files, created, opened, size) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET files = excluded.files, created = excluded.created, opened = excluded.opened,
		size = excluded.size, gone = '', gone_at = 0`, id, string(data), now, now, size); err != nil {
		return false, fmt.Errorf("shares: put: %w", err)
	}
	return true, nil
}

// expire turns the shares past their retention into tombstones.
func (s *SQLite) expire(ctx context.Context, tx *sql.Tx, now int64) (int, error) {
	cutoff := now - int64(s.cfg.Retention.Seconds())
	if s.cfg.Retention <= 0 {
		cutoff = -1 << 62 // nothing expires; the statement still takes the write lock
	}
	res, err := tx.ExecContext(ctx, `UPDATE shares SET files = '', size = 0, gone = ?, gone_at = ?
		WHERE gone = '' AND opened <= ?`, goneExpired, now, cutoff)
	if err != nil {
		return 0, fmt.Errorf("shares: expire: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// Get returns the files of a share and counts it as opened (see Store).
func (s *SQLite) Get(ctx context.Context, id string) ([]File, error) {
	if !validID(id) {
		return nil, ErrBadID
	}
	var (
		data   string
		opened int64
		gone   string
	)
	err := s.db.QueryRowContext(ctx, `SELECT files, opened, gone FROM shares WHERE id = ?`, id).Scan(&data, &opened, &gone)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("shares: get: %w", err)
	}
	if gone != "" {
		return nil, goneError(id, gone, s.cfg.Retention)
	}
	now := s.cfg.Now().Unix()
	if s.cfg.Retention > 0 && opened <= now-int64(s.cfg.Retention.Seconds()) {
		return nil, s.tombstone(ctx, id, goneExpired, now)
	}
	if now-opened >= touchEvery { // a share opened by many at once is written once a minute
		if err := s.touch(ctx, id, now); err != nil {
			return nil, err
		}
	}
	return decodeFiles(id, []byte(data))
}

func (s *SQLite) touch(ctx context.Context, id string, now int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.db.ExecContext(ctx, `UPDATE shares SET opened = ? WHERE id = ? AND gone = ''`, now, id); err != nil {
		return fmt.Errorf("shares: get: %w", err)
	}
	return nil
}

// tombstone drops a live share's files, recording why; it returns the
// error a reader of the share gets, or ErrNotFound when no live share
// has the id.
func (s *SQLite) tombstone(ctx context.Context, id, reason string, now int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.db.ExecContext(ctx, `UPDATE shares SET files = '', size = 0, gone = ?, gone_at = ?
		WHERE id = ? AND gone = ''`, reason, now, id)
	if err != nil {
		return fmt.Errorf("shares: %s %s: %w", reason, id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return ErrNotFound
	}
	return goneError(id, reason, s.cfg.Retention)
}

// Delete removes a share for good; readers then get ErrGone (see Store).
func (s *SQLite) Delete(ctx context.Context, id string) error {
	if !validID(id) {
		return ErrBadID
	}
	if err := s.tombstone(ctx, id, goneDeleted, s.cfg.Now().Unix()); !errors.Is(err, ErrGone) {
		return err
	}
	return nil
}

// Prune expires shares past their retention and forgets old tombstones.
func (s *SQLite) Prune(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("shares: prune: %w", err)
	}
	defer tx.Rollback()
	now := s.cfg.Now().Unix()
	n, err := s.expire(ctx, tx, now)
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM shares WHERE gone != '' AND gone_at <= ?`,
		now-int64(GoneFor.Seconds())); err != nil {
		return 0, fmt.Errorf("shares: prune: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("shares: prune: %w", err)
	}
	return n, nil
}

// Usage returns how many shares are kept and their bytes.
func (s *SQLite) Usage(ctx context.Context) (count int, bytes int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(size), 0) FROM shares WHERE gone = ''`).Scan(&count, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("shares: usage: %w", err)
	}
	return count, bytes, nil
}

// Each calls fn with every kept share and its last open, in id order, for
// copying the shares elsewhere (usher share copy). It stops at fn's first
// error.
func (s *SQLite) Each(ctx context.Context, fn func(files []File, opened time.Time) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT id, files, opened FROM shares WHERE gone = '' ORDER BY id`)
	if err != nil {
		return fmt.Errorf("shares: list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, data string
			opened   int64
		)
		if err := rows.Scan(&id, &data, &opened); err != nil {
			return fmt.Errorf("shares: list: %w", err)
		}
		files, err := decodeFiles(id, []byte(data))
		if err != nil {
			return err
		}
		if err := fn(files, time.Unix(opened, 0)); err != nil {
			return err
		}
	}
	return rows.Err()
}
