package renderapi

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sqlitedb"
)

// Sources keeps the source of every render by its content id, so that
// GET /api/render/{id}.{format} can recompute a result the result cache
// has evicted. A source is small (at most the queue's upload limit); the
// store is bounded (SQLite: total bytes, oldest first; Redis: retention).
type Sources interface {
	Put(ctx context.Context, id string, t sandbox.Task) error
	// Get returns the task stored under id; ok is false when there is none.
	Get(ctx context.Context, id string) (t sandbox.Task, ok bool, err error)
}

// storedTask is the stored form of a render's source.
type storedTask struct {
	Format    string         `json:"format"`
	TimeoutMS int64          `json:"timeout_ms,omitempty"`
	Files     []sandbox.File `json:"files"`
}

func encodeTask(t sandbox.Task) ([]byte, error) {
	b, err := json.Marshal(storedTask{Format: t.Format, TimeoutMS: t.Timeout.Milliseconds(), Files: t.Files})
	if err != nil {
		return nil, fmt.Errorf("render sources: encode: %w", err)
	}
	return b, nil
}

func decodeTask(b []byte) (sandbox.Task, error) {
	var s storedTask
	if err := json.Unmarshal(b, &s); err != nil {
		return sandbox.Task{}, fmt.Errorf("render sources: decode: %w", err)
	}
	return sandbox.Task{Format: s.Format, Timeout: time.Duration(s.TimeoutMS) * time.Millisecond, Files: s.Files}, nil
}

// DefaultSourceBytes bounds the SQLite source store when no bound is given.
const DefaultSourceBytes = 64 << 20

var sqliteSchema = []string{`
CREATE TABLE render_sources (
	id   TEXT PRIMARY KEY,
	task BLOB NOT NULL,
	size INTEGER NOT NULL,
	used INTEGER NOT NULL
);
CREATE INDEX render_sources_used ON render_sources (used);`}

// SQLiteSources keeps sources in the SQLite data file, at most maxBytes of
// them: beyond that the least recently rendered go first. A source counts
// as used when it is rendered by POST or by the query form, and when its
// id is fetched (at most once an hour per id).
type SQLiteSources struct {
	db       *sql.DB
	maxBytes int64
	now      func() time.Time

	mu    sync.Mutex
	total int64 // bytes stored; this process is the file's only writer
}

// touchEvery is how stale a source's use time may get before a fetch
// by id writes it again: fetches of a popular figure stay reads.
const touchEvery = time.Hour

// OpenSQLiteSources prepares the source table in db.
func OpenSQLiteSources(ctx context.Context, db *sql.DB, maxBytes int64) (*SQLiteSources, error) {
	if err := sqlitedb.Migrate(ctx, db, "render_sources", sqliteSchema); err != nil {
		return nil, err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultSourceBytes
	}
	s := &SQLiteSources{db: db, maxBytes: maxBytes, now: time.Now}
	if err := s.count(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *SQLiteSources) count(ctx context.Context) error {
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(size), 0) FROM render_sources`).Scan(&s.total)
	if err != nil {
		return fmt.Errorf("render sources: count: %w", err)
	}
	return nil
}

// Put stores t under id, or marks it used when it is there, and evicts
// the least recently used sources beyond the bound.
func (s *SQLiteSources) Put(ctx context.Context, id string, t sandbox.Task) error {
	b, err := encodeTask(t)
	if err != nil {
		return err
	}
	now := s.now()
	res, err := s.db.ExecContext(ctx, `INSERT INTO render_sources (id, task, size, used) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`, id, b, len(b), now.UnixMilli())
	if err != nil {
		return fmt.Errorf("render sources: put: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return s.touch(ctx, id, now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total += int64(len(b))
	if s.total <= s.maxBytes {
		return nil
	}
	return s.evict(ctx)
}

// touch marks id used now unless it was within touchEvery: renders of a
// popular figure stay reads.
func (s *SQLiteSources) touch(ctx context.Context, id string, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE render_sources SET used = ? WHERE id = ? AND used < ?`,
		now.UnixMilli(), id, now.Add(-touchEvery).UnixMilli())
	if err != nil {
		return fmt.Errorf("render sources: touch: %w", err)
	}
	return nil
}

// evict deletes the least recently used sources beyond the bound. s.mu
// is held.
func (s *SQLiteSources) evict(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM render_sources WHERE id IN (
		SELECT id FROM (SELECT id, SUM(size) OVER (ORDER BY used DESC, id) AS running FROM render_sources)
		WHERE running > ?)`, s.maxBytes)
	if err != nil {
		return fmt.Errorf("render sources: evict: %w", err)
	}
	return s.count(ctx)
}

// Get returns the source stored under id.
func (s *SQLiteSources) Get(ctx context.Context, id string) (sandbox.Task, bool, error) {
	var b []byte
	var used int64
	err := s.db.QueryRowContext(ctx, `SELECT task, used FROM render_sources WHERE id = ?`, id).Scan(&b, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return sandbox.Task{}, false, nil
	}
	if err != nil {
		return sandbox.Task{}, false, fmt.Errorf("render sources: get: %w", err)
	}
	if now := s.now(); now.Sub(time.UnixMilli(used)) > touchEvery {
		if err := s.touch(ctx, id, now); err != nil {
			return sandbox.Task{}, false, err
		}
	}
	t, err := decodeTask(b)
	return t, err == nil, err
}

// DefaultSourceRetention is how long the Redis source store keeps a
// source after its last use when no retention is given.
const DefaultSourceRetention = 30 * 24 * time.Hour

// RedisSources keeps sources in multi-node mode's Redis, so that every
// queue server answers every id: one string per id under the queue
// servers' key prefix, expiring retention after its last use.
type RedisSources struct {
	rdb       redis.UniversalClient
	keys      redisq.Keys
	retention time.Duration
}

// NewRedisSources keeps sources in rdb under keys' RenderSource names.
func NewRedisSources(rdb redis.UniversalClient, keys redisq.Keys, retention time.Duration) *RedisSources {
	if retention <= 0 {
		retention = DefaultSourceRetention
	}
	return &RedisSources{rdb: rdb, keys: keys, retention: retention}
}

// Put stores t under id for the retention.
func (s *RedisSources) Put(ctx context.Context, id string, t sandbox.Task) error {
	b, err := encodeTask(t)
	if err != nil {
		return err
	}
	if err := s.rdb.Set(ctx, s.keys.RenderSource(id), b, s.retention).Err(); err != nil {
		return fmt.Errorf("render sources: put: %w", err)
	}
	return nil
}

// Get returns the source under id and restarts its retention.
func (s *RedisSources) Get(ctx context.Context, id string) (sandbox.Task, bool, error) {
	b, err := s.rdb.GetEx(ctx, s.keys.RenderSource(id), s.retention).Bytes()
	if errors.Is(err, redis.Nil) {
		return sandbox.Task{}, false, nil
	}
	if err != nil {
		return sandbox.Task{}, false, fmt.Errorf("render sources: get: %w", err)
	}
	t, err := decodeTask(b)
	return t, err == nil, err
}
