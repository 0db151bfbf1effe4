package tokens

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/sqlitedb"
)

var schema = []string{`
CREATE TABLE api_tokens (
	id TEXT PRIMARY KEY,
	hash BLOB NOT NULL UNIQUE,
	name TEXT NOT NULL,
	role TEXT NOT NULL,
	created_at INTEGER NOT NULL
);`}

// sqliteBackend keeps tokens in the SQLite file and every record in
// memory: one server owns the file, so memory is never stale.
type sqliteBackend struct {
	db     *sql.DB
	mu     sync.RWMutex
	byHash map[[32]byte]Token
}

// Open prepares the table in db and loads the tokens.
func Open(ctx context.Context, db *sql.DB) (*Store, error) {
	if err := sqlitedb.Migrate(ctx, db, "tokens", schema); err != nil {
		return nil, err
	}
	b := &sqliteBackend{db: db, byHash: map[[32]byte]Token{}}
	rows, err := db.QueryContext(ctx, `SELECT id, hash, name, role, created_at FROM api_tokens`)
	if err != nil {
		return nil, fmt.Errorf("tokens: load: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t Token
		var hash []byte
		var created int64
		if err := rows.Scan(&t.ID, &hash, &t.Name, &t.Role, &created); err != nil {
			return nil, fmt.Errorf("tokens: load: %w", err)
		}
		if len(hash) != 32 {
			return nil, fmt.Errorf("tokens: load: token %s has a hash of %d bytes, not 32", t.ID, len(hash))
		}
		t.CreatedAt = time.UnixMilli(created).UTC()
		b.byHash[[32]byte(hash)] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tokens: load: %w", err)
	}
	return &Store{b: b}, nil
}

func (b *sqliteBackend) lookup(_ context.Context, hash [32]byte) (Token, bool, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t, ok := b.byHash[hash]
	return t, ok, nil
}

func (b *sqliteBackend) insert(ctx context.Context, hash [32]byte, t Token) (Token, error) {
	if known, ok, _ := b.lookup(ctx, hash); ok {
		return known, nil
	}
	_, err := b.db.ExecContext(ctx, `INSERT INTO api_tokens (id, hash, name, role, created_at) VALUES (?, ?, ?, ?, ?)`,
		t.ID, hash[:], t.Name, string(t.Role), t.CreatedAt.UnixMilli())
	if err != nil {
		return Token{}, fmt.Errorf("tokens: create: %w", err)
	}
	b.mu.Lock()
	b.byHash[hash] = t
	b.mu.Unlock()
	return t, nil
}

func (b *sqliteBackend) list(context.Context) ([]Token, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]Token, 0, len(b.byHash))
	for _, t := range b.byHash {
		out = append(out, t)
	}
	return out, nil
}

func (b *sqliteBackend) remove(ctx context.Context, id string) (bool, error) {
	res, err := b.db.ExecContext(ctx, `DELETE FROM api_tokens WHERE id = ?`, id)
	if err != nil {
		return false, fmt.Errorf("tokens: delete: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	b.mu.Lock()
	for h, t := range b.byHash {
		if t.ID == id {
			delete(b.byHash, h)
		}
	}
	b.mu.Unlock()
	return true, nil
}
