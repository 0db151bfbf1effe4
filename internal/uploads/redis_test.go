package uploads

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testclock"
)

var keys = redisq.NewKeys(redisq.DefaultPrefix)

// redisNodes returns n stores on one real redis-server, as n queue
// servers see it, sharing a clock, and a client to inspect Redis.
func redisNodes(t *testing.T, n int, maxBytes int64) ([]*Redis, *testclock.Clock, redis.UniversalClient) {
	t.Helper()
	url := redistest.Start(t).URL()
	c := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var nodes []*Redis
	var rdb redis.UniversalClient
	for range n + 1 {
		var err error
		if rdb, err = redisq.Open(context.Background(), url, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		nodes = append(nodes, NewRedis(rdb, keys, Config{MaxBytes: maxBytes, MinAge: 10 * time.Minute, Now: c.Now}, nil))
	}
	return nodes[:n], c, rdb
}

func TestRedisRestoreFromAnotherQueueServer(t *testing.T) {
	nodes, _, _ := redisNodes(t, 2, 1<<10)
	data := []byte("draw(unitcircle);")
	if !nodes[0].Put(ctx, Hash(data), data) {
		t.Fatal("Put refused a small file into an empty store")
	}
	got, ok := nodes[1].Get(ctx, Hash(data))
	if !ok || !bytes.Equal(got, data) {
		t.Fatalf("Get on the other queue server = %q, %v; want the stored bytes", got, ok)
	}
	if _, ok := nodes[1].Get(ctx, Hash([]byte("other"))); ok {
		t.Fatal("Get found a file never stored")
	}
}

func TestRedisKeepsTheMinAgeAndByteBound(t *testing.T) {
	nodes, c, _ := redisNodes(t, 2, 10)
	a, b := []byte("aaaaaaaa"), []byte("bbbbbbbb")
	nodes[0].Put(ctx, Hash(a), a)
	c.Advance(9 * time.Minute)
	if nodes[1].Put(ctx, Hash(b), b) {
		t.Fatal("Put dropped a file used 9 minutes ago to make room")
	}
	if _, ok := nodes[1].Get(ctx, Hash(a)); !ok { // restarts its age
		t.Fatal("the young file is gone")
	}
	c.Advance(9 * time.Minute)
	if nodes[0].Put(ctx, Hash(b), b) {
		t.Fatal("a file restored 9 minutes ago was dropped")
	}
	c.Advance(time.Minute)
	if _, ok := nodes[0].Get(ctx, Hash(a)); ok {
		t.Fatal("a file unused for MinAge is still restored")
	}
	if !nodes[1].Put(ctx, Hash(b), b) {
		t.Fatal("Put refused although the old file is 10 minutes unused")
	}
	if files, n, err := nodes[0].Usage(ctx); err != nil || files != 1 || n != 8 {
		t.Fatalf("Usage = %d files, %d bytes, %v; want the new file only", files, n, err)
	}
	big := []byte("12345678901")
	if nodes[0].Put(ctx, Hash(big), big) {
		t.Fatal("Put kept a file larger than MaxBytes")
	}
}

// Writers on several queue servers at once never take the store beyond
// MaxBytes, and its byte count stays the sum of what it holds.
func TestRedisByteBoundHoldsUnderConcurrentWriters(t *testing.T) {
	const maxBytes = 4000
	nodes, c, rdb := redisNodes(t, 3, maxBytes)
	stopWatching := redistest.WatchMax(ctx, rdb, keys.UploadsBytes())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 300 {
				data := bytes.Repeat([]byte{byte(rng.IntN(60))}, 1+rng.IntN(400))
				s := nodes[rng.IntN(len(nodes))]
				switch rng.IntN(4) {
				case 0, 1:
					s.Put(ctx, Hash(data), data)
				case 2:
					if got, ok := s.Get(ctx, Hash(data)); ok && !bytes.Equal(got, data) {
						t.Errorf("Get returned other bytes")
					}
				case 3:
					c.Advance(time.Duration(rng.IntN(60)) * time.Second)
				}
			}
		}()
	}
	wg.Wait()
	if most := stopWatching(); most > maxBytes {
		t.Fatalf("the byte count reached %d, beyond %d", most, maxBytes)
	}
	checkRedisAccount(t, rdb, maxBytes)
}

// checkRedisAccount checks that the byte count is the sum of the files
// held, each with its last use, and within the bound.
func checkRedisAccount(t *testing.T, rdb redis.UniversalClient, maxBytes int64) {
	t.Helper()
	total, _ := rdb.Get(ctx, keys.UploadsBytes()).Int64()
	files, err := rdb.HGetAll(ctx, keys.Uploads()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for h, data := range files {
		sum += int64(len(data))
		if Hash([]byte(data)) != h {
			t.Fatalf("file %s holds other bytes", h)
		}
		if _, err := rdb.ZScore(ctx, keys.UploadsUsed(), h).Result(); err != nil {
			t.Fatalf("file %s has no last use: %v", h, err)
		}
	}
	if members, _ := rdb.ZCard(ctx, keys.UploadsUsed()).Result(); int(members) != len(files) {
		t.Fatalf("%d files in the zset, %d held", members, len(files))
	}
	if total != sum || total > maxBytes {
		t.Fatalf("byte count %d, sum of files %d, bound %d", total, sum, maxBytes)
	}
}

// TestRedisKeepsItsPromises drives one Redis store with random operations
// as TestStoreKeepsItsPromises does the in-memory one: never over
// MaxBytes, the count exact, every file used within MinAge restorable.
func TestRedisKeepsItsPromises(t *testing.T) {
	nodes, c, rdb := redisNodes(t, 2, 1000)
	for seed := uint64(0); seed < 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		lastUse := map[string]time.Time{}
		for range 200 {
			data := bytes.Repeat([]byte{byte(rng.IntN(40)), byte(seed)}, 1+rng.IntN(150))
			h := Hash(data)
			s := nodes[rng.IntN(2)]
			switch rng.IntN(3) {
			case 0:
				if s.Put(ctx, h, data) {
					lastUse[h] = c.Now()
				}
			case 1:
				if _, ok := s.Get(ctx, h); ok {
					lastUse[h] = c.Now()
				}
			case 2:
				c.Advance(time.Duration(rng.IntN(300)) * time.Second)
			}
			checkRedisAccount(t, rdb, 1000)
			for h, at := range lastUse {
				if c.Now().Sub(at) >= 10*time.Minute {
					delete(lastUse, h)
				} else if ok, _ := rdb.HExists(ctx, keys.Uploads(), h).Result(); !ok {
					t.Fatalf("seed %d: file used %v ago is gone", seed, c.Now().Sub(at))
				}
			}
		}
	}
}
