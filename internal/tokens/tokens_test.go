package tokens

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/sqlitedb"
)

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A created token is found by its secret, survives a reopen, is stored
// only as a hash, and is gone once deleted.
func TestTokenLifecycle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "usher.db")
	db := openDB(t, path)
	s, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	tok, secret, err := s.Create(ctx, "scanner", Agent)
	if err != nil || !strings.HasPrefix(secret, "usher_") || len(secret) < 40 {
		t.Fatalf("Create = %+v, %q, %v", tok, secret, err)
	}
	var stored int
	if err := db.QueryRow(`SELECT count(*) FROM api_tokens WHERE hash = ? OR name = ?`, secret, secret).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("the secret itself is in the file (%d rows, %v)", stored, err)
	}
	again, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := again.Lookup(secret); !ok || got != tok {
		t.Fatalf("after reopening Lookup = %+v, %v; want %+v", got, ok, tok)
	}
	if _, ok := again.Lookup(secret + "x"); ok {
		t.Fatal("a wrong secret was accepted")
	}
	if err := again.Delete(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Lookup(secret); ok {
		t.Fatal("a deleted token was accepted")
	}
	if err := again.Delete(ctx, tok.ID); err != ErrNotFound {
		t.Fatalf("deleting twice = %v; want ErrNotFound", err)
	}
}

func TestAddRefusesBadInput(t *testing.T) {
	s, err := Open(context.Background(), openDB(t, filepath.Join(t.TempDir(), "usher.db")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(context.Background(), "short", "x", Admin); err == nil {
		t.Error("a 5-character token was accepted")
	}
	if _, err := s.Add(context.Background(), "long-enough-secret-1234", "x", Role("root")); err == nil {
		t.Error("an unknown role was accepted")
	}
	first, err := s.Add(context.Background(), "long-enough-secret-1234", "x", Admin)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Add(context.Background(), "long-enough-secret-1234", "y", Agent)
	if err != nil || second != first || s.Count(Admin) != 1 {
		t.Fatalf("adding a known secret again = %+v, %v; want the first record kept", second, err)
	}
}
