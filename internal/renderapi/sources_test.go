package renderapi

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sqlitedb"
)

func sourceTask(i int, size int) sandbox.Task {
	return sandbox.Task{Format: "svg", Timeout: 3 * time.Second, Files: []sandbox.File{
		{Name: "figure.asy", Main: true, Data: bytes.Repeat([]byte{'a' + byte(i%26)}, size)},
		{Name: "mod.asy", Data: []byte("// module")},
	}}
}

func checkSame(t *testing.T, got, want sandbox.Task) {
	t.Helper()
	if got.Format != want.Format || got.Timeout != want.Timeout || len(got.Files) != len(want.Files) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range got.Files {
		g, w := got.Files[i], want.Files[i]
		if g.Name != w.Name || g.Main != w.Main || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("file %d: got %s %t, want %s %t", i, g.Name, g.Main, w.Name, w.Main)
		}
	}
}

// The SQLite store keeps sources across reopening the file, up to its
// bound in bytes: beyond it the least recently used go first.
func TestSQLiteSourcesKeepTheNewestWithinTheBound(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "usher.db")
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const size = 1000
	enc, err := encodeTask(sourceTask(0, size))
	if err != nil {
		t.Fatal(err)
	}
	bound := int64(10 * len(enc)) // ten sources
	s, err := OpenSQLiteSources(ctx, db, bound)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1_700_000_000, 0)
	s.now = func() time.Time { return clock }
	for i := range 13 {
		clock = clock.Add(time.Minute)
		if err := s.Put(ctx, fmt.Sprint(i), sourceTask(i, size)); err != nil {
			t.Fatal(err)
		}
		if i == 8 { // the first source is used again: it stays
			clock = clock.Add(2 * touchEvery)
			if _, ok, err := s.Get(ctx, "0"); !ok || err != nil {
				t.Fatalf("source 0 gone at %d (%v)", i, err)
			}
		}
	}
	reopened, err := OpenSQLiteSources(ctx, db, bound)
	if err != nil {
		t.Fatal(err)
	}
	if reopened.total != bound {
		t.Fatalf("%d bytes kept, want the bound %d", reopened.total, bound)
	}
	// Kept: 12 to 4 and 0, used after 8 (ten sources).
	for i, want := range map[int]bool{0: true, 1: false, 3: false, 4: true, 12: true} {
		got, ok, err := reopened.Get(ctx, fmt.Sprint(i))
		if err != nil || ok != want {
			t.Fatalf("source %d kept %t, want %t (%v)", i, ok, want, err)
		}
		if ok {
			checkSame(t, got, sourceTask(i, size))
		}
	}
}

// In multi-node mode every queue server reads the sources any of them
// kept; a source expires its retention after its last use.
func TestRedisSourcesAreSharedAndExpire(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	open := func() *RedisSources {
		rdb, err := redisq.Open(ctx, srv.URL(), 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		return NewRedisSources(rdb, keys, time.Hour)
	}
	a, b := open(), open()
	want := sourceTask(1, 100)
	if err := a.Put(ctx, "abc", want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.Get(ctx, "abc")
	if err != nil || !ok {
		t.Fatalf("the other queue server does not see the source: %t %v", ok, err)
	}
	checkSame(t, got, want)
	ttl := b.rdb.TTL(ctx, keys.RenderSource("abc")).Val()
	if ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("TTL %v, want the retention", ttl)
	}
	if _, ok, err := b.Get(ctx, "nope"); ok || err != nil {
		t.Fatalf("unknown id: %t %v", ok, err)
	}
}
