// Package tokens keeps the API tokens of /v1: in usher's SQLite file
// (Open), or in Redis for multi-node mode (OpenRedis), where every node
// must know the tokens any node created.
//
// A token is 32 random bytes shown once as "usher_<base64url>"; the store
// keeps only its SHA-256 (a hash that cannot be brute-forced for input of
// that entropy, so no slow password hash is needed). Each token has one
// role: admin, client or agent. The SQLite store serves lookups from
// memory; the Redis store reads Redis and keeps what it read for a short
// time (see OpenRedis).
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"
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

// backend keeps token records by the SHA-256 of their secret.
type backend interface {
	// lookup finds the record of a hash.
	lookup(ctx context.Context, hash [32]byte) (Token, bool, error)
	// insert stores t under hash unless the hash is known, and returns the
	// record stored under it.
	insert(ctx context.Context, hash [32]byte, t Token) (Token, error)
	// list returns every record.
	list(ctx context.Context) ([]Token, error)
	// remove deletes the record with the id; false when there is none.
	remove(ctx context.Context, id string) (bool, error)
}

// Store keeps tokens.
type Store struct{ b backend }

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
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Token{}, fmt.Errorf("tokens: %w", err)
	}
	t := Token{ID: hex.EncodeToString(id[:]), Name: name, Role: role, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	return s.b.insert(ctx, sha256.Sum256([]byte(secret)), t)
}

// Lookup finds the token of a secret; ErrNotFound when it is none.
func (s *Store) Lookup(ctx context.Context, secret string) (Token, error) {
	t, ok, err := s.b.lookup(ctx, sha256.Sum256([]byte(secret)))
	switch {
	case err != nil:
		return Token{}, err
	case !ok:
		return Token{}, ErrNotFound
	}
	return t, nil
}

// List returns every token, oldest first.
func (s *Store) List(ctx context.Context) ([]Token, error) {
	out, err := s.b.list(ctx)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Count returns how many tokens have the role.
func (s *Store) Count(ctx context.Context, role Role) (int, error) {
	all, err := s.b.list(ctx)
	n := 0
	for _, t := range all {
		if t.Role == role {
			n++
		}
	}
	return n, err
}

// Delete removes a token; ErrNotFound when there is none with that id.
func (s *Store) Delete(ctx context.Context, id string) error {
	ok, err := s.b.remove(ctx, id)
	switch {
	case err != nil:
		return err
	case !ok:
		return ErrNotFound
	}
	return nil
}
