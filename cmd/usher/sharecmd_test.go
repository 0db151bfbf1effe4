package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/shares"
	"github.com/usherhq/usher/internal/sqlitedb"
)

var sharedProject = []shares.File{{Filename: "main.asy", Main: true, Content: "draw(unitcircle);\n"}}

// An operator deletes a share on the SQLite file and on Redis; its link
// then answers that it was deleted, and wrong input is refused plainly.
func TestShareDelete(t *testing.T) {
	ctx := context.Background()
	cfg := shares.Config{MaxFiles: 4, MaxBytes: 1 << 10}
	path := filepath.Join(t.TempDir(), "usher.db")
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	local, err := shares.OpenSQLite(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := redistest.Start(t).URL()
	rdb, err := redisq.Open(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	stores := []struct {
		name  string
		store shares.Store
		flags []string
	}{
		{"sqlite", local, []string{"--data", path}},
		{"redis", shares.NewRedis(rdb, redisq.NewKeys("{test}:"), cfg), []string{"--redis", url, "--redis-prefix", "{test}:"}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			id, _, err := s.store.Put(ctx, sharedProject)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := runCLI(t, "", append([]string{"share", "delete", id}, s.flags...)...)
			if err != nil || !strings.Contains(out, "deleted share "+id) {
				t.Fatalf("share delete = %q, %v", out, err)
			}
			if _, err := s.store.Get(ctx, id); !errors.Is(err, shares.ErrGone) {
				t.Fatalf("Get after the delete = %v, want ErrGone", err)
			}
			for _, tc := range []struct {
				args []string
				want string
			}{
				{[]string{id}, "no share"},
				{[]string{"nope"}, `"nope" is not a share id`},
			} {
				if _, _, err := runCLI(t, "", append(append([]string{"share", "delete"}, tc.args...), s.flags...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("share delete %v = %v, want an error containing %q", tc.args, err, tc.want)
				}
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "typo.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"share", "delete", "x"}, "give either --data"},
		{[]string{"share", "delete", "x", "--data", path, "--redis", url}, "give either --data"},
		{[]string{"share", "delete", "x", "--data", missing}, "no such file"},
	} {
		if _, _, err := runCLI(t, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%v = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// Moving to multi-node mode: share copy brings every kept share of the
// data file into Redis with its last open, and only what is missing when
// run again.
func TestShareCopy(t *testing.T) {
	ctx := context.Background()
	day := 24 * time.Hour
	t0 := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	now := t0
	cfg := shares.Config{MaxFiles: 4, MaxBytes: 1 << 10, Now: func() time.Time { return now }}
	path := filepath.Join(t.TempDir(), "usher.db")
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	local, err := shares.OpenSQLite(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	project := func(n int) []shares.File {
		return []shares.File{{Filename: "main.asy", Main: true, Content: fmt.Sprintf("dot((%d,0));", n)}}
	}
	old, _, _ := local.Put(ctx, project(1))
	now = t0.Add(10 * day)
	recent, _, _ := local.Put(ctx, project(2))
	deleted, _, _ := local.Put(ctx, project(3))
	if err := local.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}

	url := redistest.Start(t).URL()
	args := []string{"share", "copy", "--data", path, "--redis", url}
	if out, _, err := runCLI(t, "", args...); err != nil || !strings.Contains(out, "copied 2 shares; 0 were in Redis already") {
		t.Fatalf("share copy = %q, %v", out, err)
	}
	if out, _, err := runCLI(t, "", args...); err != nil || !strings.Contains(out, "copied 0 shares; 2 were in Redis already") {
		t.Fatalf("share copy again = %q, %v", out, err)
	}
	rdb, err := redisq.Open(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	later := t0.Add(20 * day)
	remote := shares.NewRedis(rdb, redisq.NewKeys(redisq.DefaultPrefix),
		shares.Config{MaxFiles: 4, MaxBytes: 1 << 10, Retention: 15 * day, Now: func() time.Time { return later }})
	if files, err := remote.Get(ctx, recent); err != nil || files[0].Content != "dot((2,0));" {
		t.Fatalf("the share opened 10 days ago, from Redis: %v, %v", files, err)
	}
	if _, err := remote.Get(ctx, old); !errors.Is(err, shares.ErrGone) {
		t.Fatalf("the share last opened 20 days ago, with a 15-day retention: %v, want ErrGone (its last open was kept)", err)
	}
	if _, err := remote.Get(ctx, deleted); !errors.Is(err, shares.ErrNotFound) {
		t.Fatalf("a deleted share was copied: %v", err)
	}
	if _, _, err := runCLI(t, "", "share", "copy", "--data", path); err == nil || !strings.Contains(err.Error(), "give both") {
		t.Fatalf("share copy without --redis = %v", err)
	}
}
