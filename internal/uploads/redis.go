package uploads

import (
	"context"
	"errors"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
)

// Redis is the store of recent uploads in multi-node mode: one store for
// every queue server, so that a file uploaded through one is restored
// through any (docs/redis.md, "What queue servers share"). It keeps the
// in-memory Store's two promises — a file stays at least MinAge after its
// last store or restore, and the store never holds more than MaxBytes —
// with one difference: files unused for MinAge are dropped by the next
// store (of any file, by any queue server) instead of only when room is
// needed, so the store does not stay full of files nobody restores.
// Each change is one Lua script, so the byte total is exact with any
// number of queue servers writing at once.
type Redis struct {
	rdb  redis.UniversalClient
	keys redisq.Keys
	cfg  Config
	log  *slog.Logger
}

// NewRedis returns the store kept in rdb under keys; zero Config fields
// take the defaults. Redis failures are logged and count as not kept or
// as misses (the client then sends the file again).
func NewRedis(rdb redis.UniversalClient, keys redisq.Keys, cfg Config, log *slog.Logger) *Redis {
	if log == nil {
		log = slog.Default()
	}
	return &Redis{rdb: rdb, keys: keys, cfg: cfg.withDefaults(), log: log}
}

// Both scripts get KEYS [1] the files (hash), [2] their last uses (zset),
// [3] their byte total; ARGV[1] now and ARGV[2] MinAge, in ms, ARGV[3] the
// file's hash.

// putScript: ARGV[4] the data, ARGV[5] MaxBytes. It drops the files
// unused for MinAge (at most 1000 per call), then keeps the file if it
// fits; 1 when kept.
var putScript = redis.NewScript(`
local now, minAge, hash = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - minAge, 'LIMIT', 0, 1000)) do
	redis.call('DECRBY', KEYS[3], redis.call('HSTRLEN', KEYS[1], old))
	redis.call('HDEL', KEYS[1], old)
	redis.call('ZREM', KEYS[2], old)
end
if redis.call('HEXISTS', KEYS[1], hash) == 1 then
	redis.call('ZADD', KEYS[2], now, hash)
	return 1
end
local size = string.len(ARGV[4])
if tonumber(redis.call('GET', KEYS[3]) or '0') + size > tonumber(ARGV[5]) then return 0 end
redis.call('HSET', KEYS[1], hash, ARGV[4])
redis.call('ZADD', KEYS[2], now, hash)
redis.call('INCRBY', KEYS[3], size)
return 1
`)

// getScript returns a file used within MinAge and restarts its age.
var getScript = redis.NewScript(`
local now, minAge, hash = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local used = redis.call('ZSCORE', KEYS[2], hash)
if not used or tonumber(used) <= now - minAge then return false end
redis.call('ZADD', KEYS[2], now, hash)
return redis.call('HGET', KEYS[1], hash)
`)

func (s *Redis) scriptKeys() []string {
	return []string{s.keys.Uploads(), s.keys.UploadsUsed(), s.keys.UploadsBytes()}
}

// Put keeps data under its hash, which the caller has already checked; it
// reports whether the file is kept (see Store.Put).
func (s *Redis) Put(ctx context.Context, hash string, data []byte) bool {
	if int64(len(data)) > s.cfg.MaxBytes {
		return false
	}
	kept, err := putScript.Run(ctx, s.rdb, s.scriptKeys(), s.cfg.Now().UnixMilli(), s.cfg.MinAge.Milliseconds(), hash,
		data, s.cfg.MaxBytes).Int()
	if err != nil {
		s.log.Warn("uploads: not kept in Redis", "hash", hash, "err", err)
		return false
	}
	return kept == 1
}

// Get returns the file stored under hash and restarts its age.
func (s *Redis) Get(ctx context.Context, hash string) ([]byte, bool) {
	v, err := getScript.Run(ctx, s.rdb, s.scriptKeys(), s.cfg.Now().UnixMilli(), s.cfg.MinAge.Milliseconds(), hash).Text()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			s.log.Warn("uploads: Redis read failed; the client is asked to send the file", "hash", hash, "err", err)
		}
		return nil, false
	}
	return []byte(v), true
}

// Usage returns how many files and bytes the store counts (files unused
// for MinAge are counted until the next Put drops them).
func (s *Redis) Usage(ctx context.Context) (files int, bytes int64, err error) {
	n, err := s.rdb.ZCard(ctx, s.keys.UploadsUsed()).Result()
	if err != nil {
		return 0, 0, err
	}
	b, err := s.rdb.Get(ctx, s.keys.UploadsBytes()).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, err
	}
	return int(n), b, nil
}
