package shares

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

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

// Every script gets the same KEYS: [1] the shares (hash), [2] their last
// opens (zset), [3] their byte total, [4] the tombstones (hash), [5] when
// each share went (zset). ARGV[1] is now and ARGV[2] the retention, in
// seconds (0: none), ARGV[3] a tombstone's life.

// expireLua turns the shares not opened within the retention into
// tombstones (at most 1000 per call, counted in `expired`) and forgets
// tombstones older than a tombstone's life.
const expireLua = `
local now, ret = tonumber(ARGV[1]), tonumber(ARGV[2])
local function bury(id, why)
	redis.call('DECRBY', KEYS[3], redis.call('HSTRLEN', KEYS[1], id))
	redis.call('HDEL', KEYS[1], id)
	redis.call('ZREM', KEYS[2], id)
	redis.call('HSET', KEYS[4], id, why)
	redis.call('ZADD', KEYS[5], now, id)
end
local expired = 0
if ret > 0 then
	for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - ret, 'LIMIT', 0, 1000)) do
		bury(old, 'expired')
		expired = expired + 1
	end
end
for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[3]), 'LIMIT', 0, 1000)) do
	redis.call('HDEL', KEYS[4], old)
	redis.call('ZREM', KEYS[5], old)
end
`

// putScript: ARGV[4] the id, ARGV[5] its stored files, ARGV[6] the quota
// (0: none). It returns {1} when stored, {0} when kept already (its age
// restarts), {-1, used} when the quota refuses it.
var putScript = redis.NewScript(expireLua + `
local id = ARGV[4]
if redis.call('HEXISTS', KEYS[1], id) == 1 then
	if now > tonumber(redis.call('ZSCORE', KEYS[2], id) or '0') then
		redis.call('ZADD', KEYS[2], now, id)
	end
	return {0, 0}
end
local size, quota = string.len(ARGV[5]), tonumber(ARGV[6])
local used = tonumber(redis.call('GET', KEYS[3]) or '0')
if quota > 0 and used + size > quota then
	return {-1, used}
end
redis.call('HSET', KEYS[1], id, ARGV[5])
redis.call('ZADD', KEYS[2], now, id)
redis.call('INCRBY', KEYS[3], size)
redis.call('HDEL', KEYS[4], id)
redis.call('ZREM', KEYS[5], id)
return {1, 0}
`)

// pruneScript expires what expireLua finds and returns how many.
var pruneScript = redis.NewScript(expireLua + `return expired`)

// getScript: ARGV[4] the id. It returns {'ok', files}, {'gone', reason}
// or {'none', ""}, and counts a kept share as opened.
var getScript = redis.NewScript(`
local now, ret, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4]
local files = redis.call('HGET', KEYS[1], id)
if not files then
	local why = redis.call('HGET', KEYS[4], id)
	if why then return {'gone', why} end
	return {'none', ''}
end
if ret > 0 and tonumber(redis.call('ZSCORE', KEYS[2], id) or '0') <= now - ret then
	redis.call('DECRBY', KEYS[3], string.len(files))
	redis.call('HDEL', KEYS[1], id)
	redis.call('ZREM', KEYS[2], id)
	redis.call('HSET', KEYS[4], id, 'expired')
	redis.call('ZADD', KEYS[5], now, id)
	return {'gone', 'expired'}
end
redis.call('ZADD', KEYS[2], now, id)
return {'ok', files}
`)

// deleteScript: ARGV[4] the id. It returns 1 when a kept share was
// deleted.
var deleteScript = redis.NewScript(`
local size = redis.call('HSTRLEN', KEYS[1], ARGV[4])
if redis.call('HDEL', KEYS[1], ARGV[4]) == 0 then return 0 end
redis.call('DECRBY', KEYS[3], size)
redis.call('ZREM', KEYS[2], ARGV[4])
redis.call('HSET', KEYS[4], ARGV[4], 'deleted')
redis.call('ZADD', KEYS[5], ARGV[1], ARGV[4])
return 1
`)

func (s *Redis) scriptKeys() []string {
	return []string{s.keys.Shares(), s.keys.SharesOpened(), s.keys.SharesBytes(), s.keys.SharesGone(), s.keys.SharesGoneAt()}
}

// args are ARGV: now, the retention and a tombstone's life, then more.
func (s *Redis) args(more ...any) []any {
	return append([]any{s.cfg.Now().Unix(), int64(s.cfg.Retention.Seconds()), int64(GoneFor.Seconds())}, more...)
}

// MaxBytes is the most content one share may hold.
func (s *Redis) MaxBytes() int64 { return s.cfg.MaxBytes }

// Put checks and stores files (see Store).
func (s *Redis) Put(ctx context.Context, files []File) (id string, created bool, err error) {
	return s.put(ctx, files, s.cfg.Now())
}

// Import stores files as a share last opened at opened, for copying
// shares from another store (usher share copy); created is false when
// the share is there already (its last open is then the later of the
// two).
func (s *Redis) Import(ctx context.Context, files []File, opened time.Time) (id string, created bool, err error) {
	return s.put(ctx, files, opened)
}

func (s *Redis) put(ctx context.Context, files []File, now time.Time) (id string, created bool, err error) {
	id, data, err := s.cfg.encode(files)
	if err != nil {
		return "", false, err
	}
	args := []any{now.Unix(), int64(s.cfg.Retention.Seconds()), int64(GoneFor.Seconds()), id, data, s.cfg.Quota}
	res, err := putScript.Run(ctx, s.rdb, s.scriptKeys(), args...).Int64Slice()
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
	res, err := getScript.Run(ctx, s.rdb, s.scriptKeys(), s.args(id)...).StringSlice()
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
	n, err := deleteScript.Run(ctx, s.rdb, s.scriptKeys(), s.args(id)...).Int()
	if err != nil {
		return fmt.Errorf("shares: delete: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// Prune expires shares past their retention and forgets old tombstones.
func (s *Redis) Prune(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := pruneScript.Run(ctx, s.rdb, s.scriptKeys(), s.args()...).Int()
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
