package resultcache

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sqlitedb"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { c.t = c.t.Add(time.Millisecond); return c.t }

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func entry(data string) Entry {
	return Entry{Time: 250 * time.Millisecond, Chunks: []Chunk{
		{Kind: Output, Label: "stdout", Data: []byte("note\n")},
		{Kind: Result, Label: "svg", Data: []byte(data)},
	}}
}

func TestCachedEntryComesBackExactlyAfterRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "usher.db")
	c, err := Open(ctx, openDB(t, path), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := entry("<svg/>")
	if err := c.Put(ctx, "k", want); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(ctx, openDB(t, path), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := c2.Get(ctx, "k")
	if err != nil || !ok {
		t.Fatalf("Get after reopen = %v, %v", ok, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Get = %+v, want %+v", got, want)
	}
	if c2.Bytes() != want.Size() {
		t.Fatalf("Bytes after reopen = %d, want %d", c2.Bytes(), want.Size())
	}
}

func TestCacheMissIsNotAnError(t *testing.T) {
	ctx := context.Background()
	c, err := Open(ctx, openDB(t, filepath.Join(t.TempDir(), "usher.db")), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(ctx, "absent"); ok || err != nil {
		t.Fatalf("Get(absent) = %v, %v; want a plain miss", ok, err)
	}
}

func TestCacheEvictsLeastRecentlyUsedBeyondItsBound(t *testing.T) {
	ctx := context.Background()
	size := entry("0123456789").Size()
	clk := &clock{t: time.Unix(0, 0)}
	c, err := Open(ctx, openDB(t, filepath.Join(t.TempDir(), "usher.db")), 2*size, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if err := c.Put(ctx, k, entry("0123456789")); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := c.Get(ctx, "a"); !ok { // a is now more recent than b
		t.Fatal("a missing before the bound is reached")
	}
	if err := c.Put(ctx, "c", entry("0123456789")); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if _, ok, _ := c.Get(ctx, k); ok != want {
			t.Errorf("after eviction, %s present = %v, want %v", k, ok, want)
		}
	}
	if c.Bytes() > 2*size {
		t.Fatalf("Bytes = %d, over the bound %d", c.Bytes(), 2*size)
	}
}

func TestEntryLargerThanCacheIsNotStored(t *testing.T) {
	ctx := context.Background()
	c, err := Open(ctx, openDB(t, filepath.Join(t.TempDir(), "usher.db")), 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "big", entry("far more than eight bytes")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Get(ctx, "big"); ok || c.Bytes() != 0 {
		t.Fatal("an entry larger than the cache was stored")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(entry("<svg/>")))
	f.Add([]byte{encodingVersion, 0, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decode(b)
		if err != nil {
			return
		}
		if again, err := decode(encode(e)); err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", e, again, err)
		}
	})
}
