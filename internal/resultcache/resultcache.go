// Package resultcache keeps the outputs of successful Asymptote runs, so
// that the same files and options on the same asy version are answered
// without running asy again. It lives in usher's SQLite file, survives a
// restart, and is bounded in bytes: the least recently used entries go
// first.
package resultcache

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/sqlitedb"
)

// Kind says what a recorded chunk was.
type Kind uint8

// Kinds of chunk, as the protocol's messages name them.
const (
	Output Kind = iota + 1 // an output message; Label is the stream
	Result                 // a result message; Label is the format
)

// Chunk is one message of a recorded run, in the order the client got it.
type Chunk struct {
	Kind  Kind
	Label string // the stream of an output, the format of a result
	Data  []byte
}

// Entry is a whole successful run: its messages and how long asy took.
type Entry struct {
	Chunks []Chunk
	Time   time.Duration
}

// Size is the number of bytes an entry counts against the cache's bound.
func (e Entry) Size() int64 {
	var n int64
	for _, c := range e.Chunks {
		n += int64(len(c.Data) + len(c.Label) + 2)
	}
	return n
}

var schema = []string{`
CREATE TABLE result_cache (
	key       TEXT PRIMARY KEY,
	entry     BLOB NOT NULL,
	size      INTEGER NOT NULL,
	last_used INTEGER NOT NULL
);
CREATE INDEX result_cache_last_used ON result_cache (last_used);`}

// Cache is a bounded store of entries by key. It is safe for concurrent use.
type Cache struct {
	db       *sql.DB
	maxBytes int64
	now      func() time.Time

	mu    sync.Mutex // serializes writers so the byte total stays exact
	bytes int64
}

// Open prepares the cache's table in db and returns a cache holding at most
// maxBytes. now is the clock (time.Now when nil).
func Open(ctx context.Context, db *sql.DB, maxBytes int64, now func() time.Time) (*Cache, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("resultcache: max bytes must be positive, got %d", maxBytes)
	}
	if now == nil {
		now = time.Now
	}
	if err := sqlitedb.Migrate(ctx, db, "result_cache", schema); err != nil {
		return nil, err
	}
	c := &Cache{db: db, maxBytes: maxBytes, now: now}
	if err := db.QueryRowContext(ctx, `SELECT coalesce(sum(size), 0) FROM result_cache`).Scan(&c.bytes); err != nil {
		return nil, fmt.Errorf("resultcache: open: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.evictLocked(ctx); err != nil { // the bound may have shrunk since last run
		return nil, err
	}
	return c, nil
}

// Get returns the entry stored under key and marks it used.
func (c *Cache) Get(ctx context.Context, key string) (Entry, bool, error) {
	var blob []byte
	err := c.db.QueryRowContext(ctx, `UPDATE result_cache SET last_used = ? WHERE key = ? RETURNING entry`,
		c.now().UnixNano(), key).Scan(&blob)
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("resultcache: get: %w", err)
	}
	e, err := decode(blob)
	if err != nil {
		return Entry{}, false, fmt.Errorf("resultcache: get %s: %w", key, err)
	}
	return e, true, nil
}

// Put stores e under key, replacing what was there, and evicts the least
// recently used entries beyond the bound. An entry larger than the whole
// cache is not stored.
func (c *Cache) Put(ctx context.Context, key string, e Entry) error {
	size := e.Size()
	if size > c.maxBytes {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old int64
	err := c.db.QueryRowContext(ctx, `SELECT size FROM result_cache WHERE key = ?`, key).Scan(&old)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("resultcache: put: %w", err)
	}
	if _, err := c.db.ExecContext(ctx, `INSERT INTO result_cache (key, entry, size, last_used) VALUES (?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET entry = excluded.entry, size = excluded.size, last_used = excluded.last_used`,
		key, encode(e), size, c.now().UnixNano()); err != nil {
		return fmt.Errorf("resultcache: put: %w", err)
	}
	c.bytes += size - old
	return c.evictLocked(ctx)
}

// Bytes returns how many bytes the cache holds.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

func (c *Cache) evictLocked(ctx context.Context) error {
	for c.bytes > c.maxBytes {
		var freed int64
		err := c.db.QueryRowContext(ctx, `DELETE FROM result_cache WHERE key =
			(SELECT key FROM result_cache ORDER BY last_used LIMIT 1) RETURNING size`).Scan(&freed)
		if err != nil {
			return fmt.Errorf("resultcache: evict: %w", err)
		}
		c.bytes -= freed
	}
	return nil
}
