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
// with one difference: a file goes at MinAge after its last use (its key
// expires) instead of waiting to be evicted, so an idle store shrinks.
// Each change is one Lua script, so the byte total is exact with any
// number of queue servers writing at once.
type Redis struct {
	rdb  redis.UniversalClient
	keys redisq.Keys
	cfg  Config
	log  *slog.Logger
}

// NewRedis returns the store kept in rdb under keys; zero Config fields
// take the defaults. Redis failures are logged and count as misses.
func NewRedis(rdb redis.UniversalClient, keys redisq.Keys, cfg Config, log *slog.Logger) *Redis {
	s := New(cfg) // only for the defaults
	if log == nil {
		log = slog.Default()
	}
	return &Redis{rdb: rdb, keys: keys, cfg: s.cfg, log: log}
}

// putScript: KEYS[1] the file, KEYS[2] the zset of last uses, KEYS[3] the
// sizes, KEYS[4] the byte total; ARGV[1] now (ms), ARGV[2] MinAge (ms),
// ARGV[3] the hash, ARGV[4] the data, ARGV[5] its size, ARGV[6] MaxBytes,
// ARGV[7] the prefix of file keys (under the same hash tag). It first
// drops the files unused for MinAge (their keys have expired or are about
// to), then stores the file if it fits; 1 when kept.
var putScript = redis.NewScript(`
local now, minAge = tonumber(ARGV[1]), tonumber(ARGV[2])
local used = redis.call('ZSCORE', KEYS[2], ARGV[3])
if used and tonumber(used) > now - minAge and redis.call('PEXPIRE', KEYS[1], minAge) == 1 then
	redis.call('ZADD', KEYS[2], now, ARGV[3])
	return 1
end
for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - minAge, 'LIMIT', 0, 1000)) do
	redis.call('DECRBY', KEYS[4], tonumber(redis.call('HGET', KEYS[3], old) or '0'))
	redis.call('HDEL', KEYS[3], old)
	redis.call('ZREM', KEYS[2], old)
	redis.call('DEL', ARGV[7] .. old)
end
local size = tonumber(ARGV[5])
local prev = tonumber(redis.call('HGET', KEYS[3], ARGV[3]) or '0')
local total = tonumber(redis.call('GET', KEYS[4]) or '0')
if total - prev + size > tonumber(ARGV[6]) then return 0 end
redis.call('SET', KEYS[1], ARGV[4], 'PX', minAge)
redis.call('HSET', KEYS[3], ARGV[3], size)
redis.call('ZADD', KEYS[2], now, ARGV[3])
redis.call('INCRBY', KEYS[4], size - prev)
return 1
`)

// getScript: KEYS[1] the file, KEYS[2] the zset of last uses; ARGV[1]
// now (ms), ARGV[2] MinAge (ms), ARGV[3] the hash. A file used within
// MinAge is returned and its age restarts.
var getScript = redis.NewScript(`
local now, minAge = tonumber(ARGV[1]), tonumber(ARGV[2])
local used = redis.call('ZSCORE', KEYS[2], ARGV[3])
if not used or tonumber(used) <= now - minAge then return false end
local v = redis.call('GET', KEYS[1])
if not v then return false end
redis.call('ZADD', KEYS[2], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], minAge)
return v
`)

// Put keeps data under its hash, which the caller has already checked; it
// reports whether the file is kept (see Store.Put).
func (s *Redis) Put(ctx context.Context, hash string, data []byte) bool {
	if int64(len(data)) > s.cfg.MaxBytes {
		return false
	}
	keys := []string{s.keys.UploadPrefix() + hash, s.keys.UploadsUsed(), s.keys.UploadSizes(), s.keys.UploadsBytes()}
	kept, err := putScript.Run(ctx, s.rdb, keys, s.cfg.Now().UnixMilli(), s.cfg.MinAge.Milliseconds(), hash, data,
		len(data), s.cfg.MaxBytes, s.keys.UploadPrefix()).Int()
	if err != nil {
		s.log.Warn("uploads: not kept in Redis", "hash", hash, "err", err)
		return false
	}
	return kept == 1
}

// Get returns the file stored under hash and restarts its age.
func (s *Redis) Get(ctx context.Context, hash string) ([]byte, bool) {
	v, err := getScript.Run(ctx, s.rdb, []string{s.keys.UploadPrefix() + hash, s.keys.UploadsUsed()},
		s.cfg.Now().UnixMilli(), s.cfg.MinAge.Milliseconds(), hash).Text()
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
