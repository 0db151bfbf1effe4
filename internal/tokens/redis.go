package tokens

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultCacheTTL is how long a Redis store trusts a token it read: a
// token deleted on another node stops working there within this time.
const DefaultCacheTTL = 2 * time.Second

// redisKeys are the Redis store's keys under the deployment's key prefix
// (docs/redis.md, "Generic jobs"), all it reads and writes:
//   - PREFIX tokens (hash): hex SHA-256 of a secret → the token's record
//     (JSON: id, name, role, createdAt in unix ms);
//   - PREFIX tokens.ids (hash): a token's id → hex SHA-256 of its secret.
type redisKeys struct{ byHash, ids string }

func newRedisKeys(prefix string) redisKeys {
	return redisKeys{byHash: prefix + "tokens", ids: prefix + "tokens.ids"}
}

// redisBackend keeps tokens in the two hashes of redisKeys. Lookups read Redis and keep a found record for ttl; unknown secrets are
// not cached, so a token created on another node works at once.
type redisBackend struct {
	rdb redis.UniversalClient
	redisKeys
	ttl time.Duration
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cached
}

type cached struct {
	t       Token
	expires time.Time
}

// maxCache bounds the records a Redis store keeps; past it, expired ones
// are dropped.
const maxCache = 4096

// OpenRedis returns a token store on rdb, its keys under prefix (the
// deployment's, redisq.DefaultPrefix unless configured). A token read
// from Redis is trusted for ttl (DefaultCacheTTL when 0): a deletion on
// another node takes effect here within ttl, at once on the node that
// deletes. log (nil: slog.Default) receives malformed records, which are
// skipped.
func OpenRedis(rdb redis.UniversalClient, prefix string, ttl time.Duration, log *slog.Logger) *Store {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	if log == nil {
		log = slog.Default()
	}
	return &Store{b: &redisBackend{rdb: rdb, redisKeys: newRedisKeys(prefix),
		ttl: ttl, log: log, now: time.Now, cache: map[[32]byte]cached{}}}
}

// record is a token as stored.
type record struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      Role   `json:"role"`
	CreatedAt int64  `json:"createdAt"` // unix ms
}

func encodeRecord(t Token) string {
	b, _ := json.Marshal(record{ID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt.UnixMilli()})
	return string(b)
}

// decodeRecord reads a stored record; a malformed one is an error.
func decodeRecord(s string) (Token, error) {
	var r record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Token{}, fmt.Errorf("tokens: malformed record: %w", err)
	}
	if r.ID == "" || !r.Role.Valid() {
		return Token{}, fmt.Errorf("tokens: malformed record: id %q, role %q", r.ID, r.Role)
	}
	return Token{ID: r.ID, Name: r.Name, Role: r.Role, CreatedAt: time.UnixMilli(r.CreatedAt).UTC()}, nil
}

func (b *redisBackend) lookup(ctx context.Context, hash [32]byte) (Token, bool, error) {
	now := b.now()
	b.mu.Lock()
	c, ok := b.cache[hash]
	b.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.t, true, nil
	}
	v, err := b.rdb.HGet(ctx, b.byHash, hex.EncodeToString(hash[:])).Result()
	if errors.Is(err, redis.Nil) {
		b.forget(hash)
		return Token{}, false, nil
	}
	if err != nil {
		return Token{}, false, fmt.Errorf("tokens: lookup: %w", err)
	}
	t, err := decodeRecord(v)
	if err != nil {
		b.log.Error("tokens: skipping a stored token", "key", b.byHash, "err", err)
		return Token{}, false, nil
	}
	b.remember(hash, t, now)
	return t, true, nil
}

func (b *redisBackend) remember(hash [32]byte, t Token, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.cache) >= maxCache {
		for h, c := range b.cache {
			if !now.Before(c.expires) {
				delete(b.cache, h)
			}
		}
	}
	if len(b.cache) < maxCache {
		b.cache[hash] = cached{t: t, expires: now.Add(b.ttl)}
	}
}

func (b *redisBackend) forget(hash [32]byte) {
	b.mu.Lock()
	delete(b.cache, hash)
	b.mu.Unlock()
}

// insertScript stores a record unless its hash is known; it returns the
// record stored under the hash. KEYS: tokens, tokens.ids. ARGV: hash,
// record, id.
var insertScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then return cur end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
return ARGV[2]
`)

func (b *redisBackend) insert(ctx context.Context, hash [32]byte, t Token) (Token, error) {
	v, err := insertScript.Run(ctx, b.rdb, []string{b.byHash, b.ids}, hex.EncodeToString(hash[:]), encodeRecord(t), t.ID).Text()
	if err != nil {
		return Token{}, fmt.Errorf("tokens: create: %w", err)
	}
	stored, err := decodeRecord(v)
	if err != nil {
		return Token{}, fmt.Errorf("tokens: create: the secret's stored record: %w", err)
	}
	return stored, nil
}

func (b *redisBackend) list(ctx context.Context) ([]Token, error) {
	all, err := b.rdb.HGetAll(ctx, b.byHash).Result()
	if err != nil {
		return nil, fmt.Errorf("tokens: list: %w", err)
	}
	out := make([]Token, 0, len(all))
	for _, v := range all {
		t, err := decodeRecord(v)
		if err != nil {
			b.log.Error("tokens: skipping a stored token", "key", b.byHash, "err", err)
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// removeScript deletes the record with an id. KEYS: tokens, tokens.ids.
// ARGV: id. It returns the record's hash, or false.
var removeScript = redis.NewScript(`
local h = redis.call('HGET', KEYS[2], ARGV[1])
if not h then return false end
redis.call('HDEL', KEYS[1], h)
redis.call('HDEL', KEYS[2], ARGV[1])
return h
`)

func (b *redisBackend) remove(ctx context.Context, id string) (bool, error) {
	h, err := removeScript.Run(ctx, b.rdb, []string{b.byHash, b.ids}, id).Text()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("tokens: delete: %w", err)
	}
	if raw, err := hex.DecodeString(h); err == nil && len(raw) == 32 {
		b.forget([32]byte(raw))
	}
	return true, nil
}
