// Package tokens keeps the API tokens of /v1 in usher's SQLite file.
//
// A token is 32 random bytes shown once as "usher_<base64url>"; the file
// keeps only its SHA-256 (a hash that cannot be brute-forced for input of
// that entropy, so no slow password hash is needed). Each token has one
// role: admin, client or agent. Lookups are served from memory.
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/sqlitedb"
)

// Role is what a token may do.
type Role string

// Roles, from the most to the least powerful.
const (
	Admin  Role = "admin"  // everything
	Client Role = "client" // submit and read jobs
	Agent  Role = "agent"  // lease, renew and complete jobs; read jobs
)

// Valid says whether r is a known role.
func (r Role) Valid() bool { return r == Admin || r == Client || r == Agent }

// Token is a token's public record.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
}

// ErrNotFound reports an unknown token.
var ErrNotFound = errors.New("no such token")

var schema = []string{`
CREATE TABLE api_tokens (
	id TEXT PRIMARY KEY,
	hash BLOB NOT NULL UNIQUE,
	name TEXT NOT NULL,
	role TEXT NOT NULL,
	created_at INTEGER NOT NULL
);`}

// Store keeps tokens.
type Store struct {
	db     *sql.DB
	mu     sync.RWMutex
	byHash map[[32]byte]Token
}

// Open prepares the table in db and loads the tokens.
func Open(ctx context.Context, db *sql.DB) (*Store, error) {
	if err := sqlitedb.Migrate(ctx, db, "tokens", schema); err != nil {
		return nil, err
	}
	s := &Store{db: db, byHash: map[[32]byte]Token{}}
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
		t.CreatedAt = time.UnixMilli(created).UTC()
		s.byHash[[32]byte(hash)] = t
	}
	return s, rows.Err()
}

// Create makes a new token and returns it with its secret, the only time
// the secret is known.
func (s *Store) Create(ctx context.Context, name string, role Role) (Token, string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Token{}, "", fmt.Errorf("tokens: %w", err)
	}
	secret := "usher_" + base64.RawURLEncoding.EncodeToString(raw[:])
	t, err := s.Add(ctx, secret, name, role)
	return t, secret, err
}

// Add stores a token with the given secret (at least 16 characters); a
// secret that is already a token keeps its record.
func (s *Store) Add(ctx context.Context, secret, name string, role Role) (Token, error) {
	if !role.Valid() {
		return Token{}, fmt.Errorf("tokens: unknown role %q (admin, client or agent)", role)
	}
	if len(secret) < 16 {
		return Token{}, errors.New("tokens: a token needs at least 16 characters")
	}
	hash := sha256.Sum256([]byte(secret))
	if t, ok := s.lookup(hash); ok {
		return t, nil
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Token{}, fmt.Errorf("tokens: %w", err)
	}
	t := Token{ID: hex.EncodeToString(id[:]), Name: name, Role: role, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	_, err := s.db.ExecContext(ctx, `INSERT INTO api_tokens (id, hash, name, role, created_at) VALUES (?, ?, ?, ?, ?)`,
		t.ID, hash[:], t.Name, string(t.Role), t.CreatedAt.UnixMilli())
	if err != nil {
		return Token{}, fmt.Errorf("tokens: create: %w", err)
	}
	s.mu.Lock()
	s.byHash[hash] = t
	s.mu.Unlock()
	return t, nil
}

// Lookup finds the token of a secret.
func (s *Store) Lookup(secret string) (Token, bool) {
	return s.lookup(sha256.Sum256([]byte(secret)))
}

func (s *Store) lookup(hash [32]byte) (Token, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.byHash[hash]
	return t, ok
}

// List returns every token, oldest first.
func (s *Store) List() []Token {
	s.mu.RLock()
	out := make([]Token, 0, len(s.byHash))
	for _, t := range s.byHash {
		out = append(out, t)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Count returns how many tokens have the role.
func (s *Store) Count(role Role) int {
	n := 0
	for _, t := range s.List() {
		if t.Role == role {
			n++
		}
	}
	return n
}

// Delete removes a token; ErrNotFound when there is none with that id.
func (s *Store) Delete(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM api_tokens WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("tokens: delete: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	s.mu.Lock()
	for h, t := range s.byHash {
		if t.ID == id {
			delete(s.byHash, h)
		}
	}
	s.mu.Unlock()
	return nil
}
