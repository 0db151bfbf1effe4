package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/shares"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/tokens"
)

// openDataStores opens a data file through the stores usher serve keeps
// in it.
func openDataStores(t *testing.T, path string) (*sql.DB, *shares.SQLite, *tokens.Store) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sh, err := shares.OpenSQLite(ctx, db, shares.Config{MaxFiles: 4, MaxBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokens.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	return db, sh, tok
}

// An operator backs up the data file while the server has it open; a
// server started on the copy finds the share links and tokens of before.
func TestBackupCommandKeepsSharesAndTokens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := filepath.Join(dir, "usher.db")
	_, liveShares, liveTokens := openDataStores(t, data) // stays open, as under usher serve
	id, _, err := liveShares.Put(ctx, sharedProject)
	if err != nil {
		t.Fatal(err)
	}
	token, secret, err := liveTokens.Create(ctx, "ci", tokens.Client)
	if err != nil {
		t.Fatal(err)
	}

	dest := filepath.Join(dir, "usher-copy.db")
	out, _, err := runCLI(t, "", "backup", "--data", data, dest)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("backed up %s to %s (%d bytes, integrity ok)\n", data, dest, info.Size()); out != want {
		t.Fatalf("backup printed %q, want %q", out, want)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("the copy has mode %v, want 0600: it holds the tokens", info.Mode().Perm())
	}

	_, copiedShares, copiedTokens := openDataStores(t, dest)
	files, err := copiedShares.Get(ctx, id)
	if err != nil || len(files) != 1 || files[0].Content != sharedProject[0].Content {
		t.Fatalf("share %s in the copy = %+v, %v; want the shared project", id, files, err)
	}
	got, err := copiedTokens.Lookup(ctx, secret)
	if err != nil || got.ID != token.ID || got.Role != tokens.Client {
		t.Fatalf("token in the copy = %+v, %v; want %+v", got, err, token)
	}
}

// Wrong input is refused plainly and creates or changes no file.
func TestBackupCommandRefusals(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "usher.db")
	openDataStores(t, data)
	earlier := filepath.Join(dir, "earlier.db")
	if err := os.WriteFile(earlier, []byte("last week's backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	notSQLite := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notSQLite, []byte("not a database, but long enough to have a header........................................................"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "typo.db")
	dest := filepath.Join(dir, "new.db")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing data file", []string{"--data", missing, dest}, "no such file"},
		{"no --data", []string{dest}, "give --data FILE"},
		{"no destination", []string{"--data", data}, "accepts 1 arg"},
		{"destination exists", []string{"--data", data, earlier}, earlier + " exists"},
		{"data file is not SQLite", []string{"--data", notSQLite, dest}, "not a database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCLI(t, "", append([]string{"backup"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("backup %v = %q, %v; want an error containing %q", tc.args, out, err, tc.want)
			}
			for _, name := range []string{missing, dest} {
				if _, err := os.Stat(name); err == nil {
					t.Fatalf("backup %v created %s", tc.args, name)
				}
			}
		})
	}
	if b, err := os.ReadFile(earlier); err != nil || string(b) != "last week's backup" {
		t.Fatalf("the earlier backup now holds %.40q... (%v)", b, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".usher-backup-*"))
	if len(left) > 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}
