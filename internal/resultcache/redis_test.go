package resultcache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
)

var redisKeys = redisq.NewKeys(redisq.DefaultPrefix)

// redisCaches returns n caches on one real redis-server, as n queue
// servers see it, and a client to inspect Redis.
func redisCaches(t *testing.T, n int, maxBytes int64) ([]*Redis, redis.UniversalClient) {
	t.Helper()
	url := redistest.Start(t).URL()
	var ms atomic.Int64 // a shared clock that moves 1 ms per reading
	now := func() time.Time { return time.UnixMilli(1_700_000_000_000 + ms.Add(1)) }
	var caches []*Redis
	var rdb redis.UniversalClient
	for range n + 1 {
		var err error
		if rdb, err = redisq.Open(context.Background(), url, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		c, err := NewRedis(rdb, redisKeys, maxBytes, now)
		if err != nil {
			t.Fatal(err)
		}
		caches = append(caches, c)
	}
	return caches[:n], rdb
}

func TestRedisEntryFromAnotherQueueServer(t *testing.T) {
	ctx := context.Background()
	caches, _ := redisCaches(t, 2, 1<<20)
	want := entry("<svg/>")
	if err := caches[0].Put(ctx, "k", want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := caches[1].Get(ctx, "k")
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("Get on the other queue server = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if _, ok, err := caches[1].Get(ctx, "absent"); ok || err != nil {
		t.Fatalf("Get of an absent key = %v, %v", ok, err)
	}
}

func TestRedisEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	size := int64(len(encode(entry("aaaa"))))
	caches, _ := redisCaches(t, 2, 3*size)
	for _, k := range []string{"a", "b", "c"} {
		if err := caches[0].Put(ctx, k, entry(strings.Repeat(k, 4))); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := caches[1].Get(ctx, "a"); !ok { // a is now the most recently used
		t.Fatal("a missing before any eviction")
	}
	if err := caches[1].Put(ctx, "d", entry("dddd")); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok, _ := caches[0].Get(ctx, k); ok != want {
			t.Fatalf("after evicting, %s present = %v, want %v", k, ok, want)
		}
	}
	if n, err := caches[0].Bytes(ctx); err != nil || n != 3*size {
		t.Fatalf("Bytes = %d, %v; want %d", n, err, 3*size)
	}
	if err := caches[0].Put(ctx, "huge", entry(strings.Repeat("x", int(3*size)))); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := caches[0].Get(ctx, "huge"); ok {
		t.Fatal("an entry larger than the cache was stored")
	}
}

// Writers on several queue servers at once never take the cache beyond
// its bound, and its byte count stays the sum of what it holds.
func TestRedisBoundHoldsUnderConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	const maxBytes = 5000
	caches, rdb := redisCaches(t, 3, maxBytes)
	stopWatching := redistest.WatchMax(ctx, rdb, redisKeys.CacheBytes())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 300 {
				k := fmt.Sprint(rng.IntN(80))
				c := caches[rng.IntN(len(caches))]
				if rng.IntN(2) == 0 {
					if err := c.Put(ctx, k, entry(strings.Repeat(k, 1+rng.IntN(200)))); err != nil {
						t.Error(err)
						return
					}
				} else if e, ok, err := c.Get(ctx, k); err != nil || ok && !strings.HasPrefix(string(e.Chunks[1].Data), k) {
					t.Errorf("Get(%s) = %v, %v", k, ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if most := stopWatching(); most > maxBytes {
		t.Fatalf("the byte count reached %d, beyond %d", most, maxBytes)
	}
	total, _ := rdb.Get(ctx, redisKeys.CacheBytes()).Int64()
	entries, _ := rdb.HGetAll(ctx, redisKeys.CacheEntries()).Result()
	var sum int64
	for k, v := range entries {
		sum += int64(len(v))
		if _, err := rdb.ZScore(ctx, redisKeys.CacheUsed(), k).Result(); err != nil {
			t.Fatalf("entry %s has no last use: %v", k, err)
		}
	}
	used, _ := rdb.ZCard(ctx, redisKeys.CacheUsed()).Result()
	if total != sum || total > maxBytes || int(used) != len(entries) {
		t.Fatalf("byte count %d, sum of entries %d, bound %d; %d entries, %d in the zset", total, sum, maxBytes, len(entries), used)
	}
}
