package resultcache

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/sqlitedb"
)

// BenchmarkGet is a cache hit of a 20 KiB svg: in the SQLite file (the
// embedded default) and in a local redis-server (multi-node mode), what
// a cached answer through /asy or the render API pays for its lookup.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	e := entry(strings.Repeat("<path d='M0 0L1 1'/>", 1000))
	db, err := sqlitedb.Open(ctx, filepath.Join(b.TempDir(), "usher.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	local, err := Open(ctx, db, 64<<20, nil)
	if err != nil {
		b.Fatal(err)
	}
	rdb, err := redisq.Open(ctx, redistest.Start(b).URL(), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	shared, err := NewRedis(rdb, redisq.NewKeys(redisq.DefaultPrefix), 64<<20, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		cache interface {
			Put(context.Context, string, Entry) error
			Get(context.Context, string) (Entry, bool, error)
		}
	}{{"sqlite", local}, {"redis", shared}} {
		if err := c.cache.Put(ctx, "k", e); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(e.Size())
			for b.Loop() {
				if _, ok, err := c.cache.Get(ctx, "k"); !ok || err != nil {
					b.Fatalf("Get = %v, %v", ok, err)
				}
			}
		})
	}
}
