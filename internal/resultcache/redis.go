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

// getScript: KEYS[1] the entry, KEYS[2] the zset of last uses; ARGV[1]
// now, ARGV[2] the entry's key. It marks a present entry used.
var getScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then redis.call('ZADD', KEYS[2], 'XX', ARGV[1], ARGV[2]) end
return v
`)

// putScript: KEYS[1] the entry, KEYS[2] the zset of last uses, KEYS[3]
// the sizes, KEYS[4] the byte total; ARGV[1] now, ARGV[2] the key,
// ARGV[3] the encoded entry, ARGV[4] its size, ARGV[5] the bound, ARGV[6]
// the prefix of entry keys (under the same hash tag). It returns the
// byte total after evicting.
var putScript = redis.NewScript(`
local old = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '0')
redis.call('SET', KEYS[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
local total = redis.call('INCRBY', KEYS[4], tonumber(ARGV[4]) - old)
local bound = tonumber(ARGV[5])
while total > bound do
	local victim = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
	if not victim then break end
	local size = tonumber(redis.call('HGET', KEYS[3], victim) or '0')
	redis.call('DEL', ARGV[6] .. victim)
	redis.call('HDEL', KEYS[3], victim)
	redis.call('ZREM', KEYS[2], victim)
	total = redis.call('DECRBY', KEYS[4], size)
end
return total
`)

// Get returns the entry stored under key and marks it used.
func (c *Redis) Get(ctx context.Context, key string) (Entry, bool, error) {
	blob, err := getScript.Run(ctx, c.rdb, []string{c.keys.CachePrefix() + key, c.keys.CacheUsed()},
		c.now().UnixMilli(), key).Text()
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
// beyond the bound. An entry larger than the whole cache is not stored.
func (c *Redis) Put(ctx context.Context, key string, e Entry) error {
	size := e.Size()
	if size > c.maxBytes {
		return nil
	}
	keys := []string{c.keys.CachePrefix() + key, c.keys.CacheUsed(), c.keys.CacheSizes(), c.keys.CacheBytes()}
	err := putScript.Run(ctx, c.rdb, keys, c.now().UnixMilli(), key, encode(e), size, c.maxBytes, c.keys.CachePrefix()).Err()
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
