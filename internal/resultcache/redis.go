package resultcache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
)

// Redis is the result cache of multi-node mode: one cache for every queue
// server, so that a result computed through one is answered by all
// (docs/redis.md, "What queue servers share"). It is bounded in bytes by
// its own accounting (Redis's maxmemory is not assumed): every Put is one
// Lua script that adds the entry and evicts the least recently used ones
// until the total fits, so the bound holds with any number of writers.
type Redis struct {
	rdb      redis.UniversalClient
	keys     redisq.Keys
	maxBytes int64
	now      func() time.Time
}

// NewRedis returns the cache kept in rdb under keys, holding at most
// maxBytes; now is the clock (time.Now when nil).
func NewRedis(rdb redis.UniversalClient, keys redisq.Keys, maxBytes int64, now func() time.Time) (*Redis, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("resultcache: max bytes must be positive, got %d", maxBytes)
	}
	if now == nil {
		now = time.Now
	}
	return &Redis{rdb: rdb, keys: keys, maxBytes: maxBytes, now: now}, nil
}

// Both scripts get KEYS [1] the entries (hash), [2] their last uses
// (zset), [3] their byte total; ARGV[1] now in ms, ARGV[2] the entry's key.

// getScript returns the entry and marks it used.
var getScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], ARGV[2])
if v then redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2]) end
return v
`)

// putScript: ARGV[3] the encoded entry, ARGV[4] the bound. It stores the
// entry, evicts the least recently used until the total fits, and
// returns the total.
var putScript = redis.NewScript(`
local old = redis.call('HSTRLEN', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
local total = redis.call('INCRBY', KEYS[3], string.len(ARGV[3]) - old)
local bound = tonumber(ARGV[4])
while total > bound do
	local victim = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
	if not victim then break end
	total = redis.call('DECRBY', KEYS[3], redis.call('HSTRLEN', KEYS[1], victim))
	redis.call('HDEL', KEYS[1], victim)
	redis.call('ZREM', KEYS[2], victim)
end
return total
`)

func (c *Redis) scriptKeys() []string {
	return []string{c.keys.CacheEntries(), c.keys.CacheUsed(), c.keys.CacheBytes()}
}

// Get returns the entry stored under key and marks it used.
func (c *Redis) Get(ctx context.Context, key string) (Entry, bool, error) {
	blob, err := getScript.Run(ctx, c.rdb, c.scriptKeys(), c.now().UnixMilli(), key).Text()
	if errors.Is(err, redis.Nil) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("resultcache: get: %w", err)
	}
	e, err := decode([]byte(blob))
	if err != nil {
		return Entry{}, false, fmt.Errorf("resultcache: get %s: %w", key, err)
	}
	return e, true, nil
}

// Put stores e under key and evicts the least recently used entries
// beyond the bound, counting each entry's encoded bytes (what Redis
// holds). An entry larger than the whole cache is not stored.
func (c *Redis) Put(ctx context.Context, key string, e Entry) error {
	blob := encode(e)
	if int64(len(blob)) > c.maxBytes {
		return nil
	}
	err := putScript.Run(ctx, c.rdb, c.scriptKeys(), c.now().UnixMilli(), key, blob, c.maxBytes).Err()
	if err != nil {
		return fmt.Errorf("resultcache: put: %w", err)
	}
	return nil
}

// Bytes returns how many bytes the cache holds, by its own count.
func (c *Redis) Bytes(ctx context.Context) (int64, error) {
	v, err := c.rdb.Get(ctx, c.keys.CacheBytes()).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("resultcache: bytes: %w", err)
	}
	return strconv.ParseInt(v, 10, 64)
}
