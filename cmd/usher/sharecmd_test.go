package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

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
