package tokens

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/sqlitedb"
)

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// backends opens, for each kind of store, a function that opens another
// store on the same data (a restart, or another node).
func backends(t *testing.T) map[string]func(t *testing.T) func() *Store {
	return map[string]func(t *testing.T) func() *Store{
		"sqlite": func(t *testing.T) func() *Store {
			db := openDB(t, filepath.Join(t.TempDir(), "usher.db"))
			return func() *Store {
				s, err := Open(context.Background(), db)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
		"redis": func(t *testing.T) func() *Store {
			rdb := redisClient(t, redistest.Start(t).URL())
			return func() *Store { return OpenRedis(rdb, redisq.DefaultPrefix, 0, nil) }
		},
	}
}

func redisClient(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := redisq.Open(context.Background(), url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func count(t *testing.T, s *Store, r Role) int {
	t.Helper()
	n, err := s.Count(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A created token is found by its secret, also by a store opened after
// it on the same data, and is gone once deleted; the secret itself is
// not stored.
func TestTokenLifecycle(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			reopen := open(t)
			s := reopen()
			tok, secret, err := s.Create(ctx, "scanner", Agent)
			if err != nil || !strings.HasPrefix(secret, "usher_") || len(secret) < 40 {
				t.Fatalf("Create = %+v, %q, %v", tok, secret, err)
			}
			again := reopen()
			if got, err := again.Lookup(ctx, secret); err != nil || got != tok {
				t.Fatalf("after reopening Lookup = %+v, %v; want %+v", got, err, tok)
			}
			if _, err := again.Lookup(ctx, secret+"x"); err != ErrNotFound {
				t.Fatalf("a wrong secret: %v; want ErrNotFound", err)
			}
			if list, err := again.List(ctx); err != nil || len(list) != 1 || list[0] != tok {
				t.Fatalf("List = %v, %v; want [%v]", list, err, tok)
			}
			if err := again.Delete(ctx, tok.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := again.Lookup(ctx, secret); err != ErrNotFound {
				t.Fatalf("a deleted token: %v; want ErrNotFound", err)
			}
			if err := again.Delete(ctx, tok.ID); err != ErrNotFound {
				t.Fatalf("deleting twice = %v; want ErrNotFound", err)
			}
		})
	}
}

func TestAddRefusesBadInput(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)()
			ctx := context.Background()
			if _, err := s.Add(ctx, "short", "x", Admin); err == nil {
				t.Error("a 5-character token was accepted")
			}
			if _, err := s.Add(ctx, "long-enough-secret-1234", "x", Role("root")); err == nil {
				t.Error("an unknown role was accepted")
			}
			first, err := s.Add(ctx, "long-enough-secret-1234", "x", Admin)
			if err != nil {
				t.Fatal(err)
			}
			second, err := s.Add(ctx, "long-enough-secret-1234", "y", Agent)
			if err != nil || second != first || count(t, s, Admin) != 1 || count(t, s, Agent) != 0 {
				t.Fatalf("adding a known secret again = %+v, %v; want the first record kept", second, err)
			}
		})
	}
}

// The SQLite file holds only the secret's hash.
func TestSQLiteKeepsOnlyTheHash(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "usher.db"))
	s, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := s.Create(ctx, "n", Client)
	if err != nil {
		t.Fatal(err)
	}
	var stored int
	if err := db.QueryRow(`SELECT count(*) FROM api_tokens WHERE hash = ? OR name = ?`, secret, secret).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("the secret itself is in the file (%d rows, %v)", stored, err)
	}
}

// clock is a test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// Two nodes on one Redis Cluster (hash-tag prefix): a token created on
// one works on the other at once; deleted on one, it stops working there
// at once and on the other once its cached read is older than the TTL.
func TestRedisNodesShareTokens(t *testing.T) {
	ctx := context.Background()
	rdb := redisClient(t, redistest.StartCluster(t, 3).URL())
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	clk := &clock{now: time.Unix(1700000000, 0)}
	a, b := OpenRedis(rdb, keys.Prefix(), time.Second, nil), OpenRedis(rdb, keys.Prefix(), time.Second, nil)
	a.b.(*redisBackend).now, b.b.(*redisBackend).now = clk.Now, clk.Now
	if _, err := b.Lookup(ctx, "usher_not-yet-created-secret"); err != ErrNotFound {
		t.Fatalf("an unknown secret: %v", err)
	}
	tok, err := a.Add(ctx, "usher_not-yet-created-secret", "ci", Client)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Lookup(ctx, "usher_not-yet-created-secret"); err != nil || got != tok {
		t.Fatalf("the other node's Lookup = %+v, %v; want %+v at once", got, err, tok)
	}
	if err := a.Delete(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lookup(ctx, "usher_not-yet-created-secret"); err != ErrNotFound {
		t.Fatalf("on the deleting node: %v; want ErrNotFound at once", err)
	}
	if _, err := b.Lookup(ctx, "usher_not-yet-created-secret"); err != nil {
		t.Fatalf("within the TTL the other node still trusts its read: %v", err)
	}
	clk.Add(time.Second)
	if _, err := b.Lookup(ctx, "usher_not-yet-created-secret"); err != ErrNotFound {
		t.Fatalf("past the TTL the other node: %v; want ErrNotFound", err)
	}
}

// A malformed record in Redis is skipped (and logged): its secret is
// unknown, List leaves it out, nothing panics.
func TestRedisMalformedRecordIsSkipped(t *testing.T) {
	ctx := context.Background()
	rdb := redisClient(t, redistest.Start(t).URL())
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	s := OpenRedis(rdb, keys.Prefix(), 0, nil)
	good, err := s.Add(ctx, "a-good-secret-of-some-length", "good", Admin)
	if err != nil {
		t.Fatal(err)
	}
	for i, bad := range []string{"{", `{"id":"x","role":"root"}`, `{"role":"admin"}`, `[]`} {
		secret := "bad-secret-number-" + string(rune('a'+i))
		h := sha256.Sum256([]byte(secret))
		if err := rdb.HSet(ctx, keys.Prefix()+"tokens", hex.EncodeToString(h[:]), bad).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Lookup(ctx, secret); !errors.Is(err, ErrNotFound) {
			t.Errorf("record %q: Lookup = %v; want ErrNotFound", bad, err)
		}
	}
	if list, err := s.List(ctx); err != nil || len(list) != 1 || list[0] != good {
		t.Fatalf("List = %v, %v; want only the good token", list, err)
	}
}

// A token record decodes or is an error; never a panic.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(`{"id":"a1","name":"n","role":"agent","createdAt":1}`)
	f.Add(`{"id":"","role":"admin"}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeRecord(s)
		if err == nil && (tok.ID == "" || !tok.Role.Valid()) {
			t.Fatalf("%q decoded to %+v", s, tok)
		}
	})
}
