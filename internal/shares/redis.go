package shares

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
)

// Redis keeps shares in multi-node mode's Redis, so that every queue
// server opens every share (docs/redis.md, "What queue servers share").
// Each change is one Lua script, so the bytes of all shares (the quota's
// count) stay exact with any number of queue servers writing at once.
type Redis struct {
	rdb  redis.UniversalClient
	keys redisq.Keys
	cfg  Config
}

// NewRedis returns the shares kept in rdb under keys.
func NewRedis(rdb redis.UniversalClient, keys redisq.Keys, cfg Config) *Redis {
	return &Redis{rdb: rdb, keys: keys, cfg: cfg.withDefaults()}
}

// expireLua turns the shares not opened since the cutoff into tombstones,
// at most 1000 per call, counting them in `expired`. KEYS[3] is the zset
// of last opens, KEYS[4] the byte total; ARGV[1] now, ARGV[2] the
// retention (0: none), ARGV[3] and ARGV[4] the prefixes of share and
// tombstone keys (under the same hash tag), ARGV[5] a tombstone's life.
const expireLua = `
local now, ret = tonumber(ARGV[1]), tonumber(ARGV[2])
local expired = 0
if ret > 0 then
	for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - ret, 'LIMIT', 0, 1000)) do
		local key = ARGV[3] .. old
		redis.call('DECRBY', KEYS[4], tonumber(redis.call('HGET', key, 'size') or '0'))
		redis.call('DEL', key)
		redis.call('ZREM', KEYS[3], old)
		redis.call('SET', ARGV[4] .. old, 'expired', 'EX', ARGV[5])
		expired = expired + 1
	end
end
`

// putScript: KEYS[1] the share, KEYS[2] its tombstone; ARGV[6] the id,
// ARGV[7] its stored files, ARGV[8] their size, ARGV[9] the quota (0:
// none). It returns {1} when stored, {0} when kept already (its age
// restarts), {-1, used} when the quota refuses it.
var putScript = redis.NewScript(expireLua + `
if redis.call('EXISTS', KEYS[1]) == 1 then
	redis.call('HSET', KEYS[1], 'opened', now)
	redis.call('ZADD', KEYS[3], now, ARGV[6])
	return {0, 0}
end
local size, quota = tonumber(ARGV[8]), tonumber(ARGV[9])
local used = tonumber(redis.call('GET', KEYS[4]) or '0')
if quota > 0 and used + size > quota then
	return {-1, used}
end
redis.call('HSET', KEYS[1], 'files', ARGV[7], 'size', size, 'created', now, 'opened', now)
redis.call('ZADD', KEYS[3], now, ARGV[6])
redis.call('INCRBY', KEYS[4], size)
redis.call('DEL', KEYS[2])
return {1, 0}
`)

// pruneScript expires what expireLua finds and returns how many.
var pruneScript = redis.NewScript(expireLua + `return expired`)

// getScript: KEYS as putScript's; ARGV[1] now, ARGV[2] the retention,
// ARGV[3] the id, ARGV[4] a tombstone's life. It returns {'ok', files},
// {'gone', reason} or {'none', ""}, and counts a kept share as opened.
var getScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'files', 'opened', 'size')
if not h[1] then
	local why = redis.call('GET', KEYS[2])
	if why then return {'gone', why} end
	return {'none', ''}
end
local now, ret = tonumber(ARGV[1]), tonumber(ARGV[2])
if ret > 0 and tonumber(h[2]) <= now - ret then
	redis.call('DEL', KEYS[1])
	redis.call('ZREM', KEYS[3], ARGV[3])
	redis.call('DECRBY', KEYS[4], tonumber(h[3]))
	redis.call('SET', KEYS[2], 'expired', 'EX', ARGV[4])
	return {'gone', 'expired'}
end
redis.call('HSET', KEYS[1], 'opened', now)
redis.call('ZADD', KEYS[3], now, ARGV[3])
return {'ok', h[1]}
`)

// deleteScript: KEYS as putScript's; ARGV[1] the id, ARGV[2] a
// tombstone's life. It returns 1 when a kept share was deleted.
var deleteScript = redis.NewScript(`
local size = redis.call('HGET', KEYS[1], 'size')
if not size then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DECRBY', KEYS[4], tonumber(size))
redis.call('SET', KEYS[2], 'deleted', 'EX', ARGV[2])
return 1
`)

func (s *Redis) scriptKeys(id string) []string {
	return []string{s.keys.Share(id), s.keys.ShareGone(id), s.keys.SharesOpened(), s.keys.SharesBytes()}
}

// expireArgs are ARGV[1..5] of expireLua.
func (s *Redis) expireArgs() []any {
	return []any{s.cfg.Now().Unix(), int64(s.cfg.Retention.Seconds()), s.keys.Share(""), s.keys.ShareGone(""),
		int64(GoneFor.Seconds())}
}

// MaxBytes is the most content one share may hold.
func (s *Redis) MaxBytes() int64 { return s.cfg.MaxBytes }

// Put checks and stores files (see Store).
func (s *Redis) Put(ctx context.Context, files []File) (id string, created bool, err error) {
	id, data, err := s.cfg.encode(files)
	if err != nil {
		return "", false, err
	}
	args := append(s.expireArgs(), id, data, len(data), s.cfg.Quota)
	res, err := putScript.Run(ctx, s.rdb, s.scriptKeys(id), args...).Int64Slice()
	if err != nil {
		return "", false, fmt.Errorf("shares: put: %w", err)
	}
	if res[0] < 0 {
		return "", false, fullError(res[1], int64(len(data)), s.cfg.Quota)
	}
	return id, res[0] == 1, nil
}

// Get returns the files of a share and counts it as opened (see Store).
func (s *Redis) Get(ctx context.Context, id string) ([]File, error) {
	if !validID(id) {
		return nil, ErrBadID
	}
	res, err := getScript.Run(ctx, s.rdb, s.scriptKeys(id), s.cfg.Now().Unix(), int64(s.cfg.Retention.Seconds()),
		id, int64(GoneFor.Seconds())).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("shares: get: %w", err)
	}
	switch res[0] {
	case "ok":
		return decodeFiles(id, []byte(res[1]))
	case "gone":
		return nil, goneError(id, res[1], s.cfg.Retention)
	default:
		return nil, ErrNotFound
	}
}

// Delete removes a share for good; readers then get ErrGone (see Store).
func (s *Redis) Delete(ctx context.Context, id string) error {
	if !validID(id) {
		return ErrBadID
	}
	n, err := deleteScript.Run(ctx, s.rdb, s.scriptKeys(id), id, int64(GoneFor.Seconds())).Int()
	if err != nil {
		return fmt.Errorf("shares: delete: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// Prune expires shares past their retention (tombstones expire on their
// own in Redis).
func (s *Redis) Prune(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := pruneScript.Run(ctx, s.rdb, s.scriptKeys(""), s.expireArgs()...).Int()
		if err != nil {
			return total, fmt.Errorf("shares: prune: %w", err)
		}
		total += n
		if n < 1000 {
			return total, nil
		}
	}
}

// Usage returns how many shares are kept and their bytes.
func (s *Redis) Usage(ctx context.Context) (count int, bytes int64, err error) {
	n, err := s.rdb.ZCard(ctx, s.keys.SharesOpened()).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("shares: usage: %w", err)
	}
	b, err := s.rdb.Get(ctx, s.keys.SharesBytes()).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, fmt.Errorf("shares: usage: %w", err)
	}
	bytes, _ = strconv.ParseInt(b, 10, 64)
	return int(n), bytes, nil
}
