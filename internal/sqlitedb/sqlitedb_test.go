package sqlitedb

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestMigrateRunsEachStepOnceAcrossReopens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "usher.db")
	steps := []string{`CREATE TABLE a (x INTEGER)`}
	for round := 0; round < 2; round++ {
		db, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := Migrate(ctx, db, "test", steps); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO a (x) VALUES (?)`, round); err != nil {
			t.Fatal(err)
		}
		db.Close()
		steps = append(steps, `ALTER TABLE a ADD COLUMN y TEXT`)
	}
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM a WHERE y IS NULL`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("rows = %d, want both rows kept through the migration", rows)
	}
}

func TestMigrateRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "usher.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Migrate(ctx, db, "test", []string{`CREATE TABLE a (x)`, `CREATE TABLE b (x)`}); err != nil {
		t.Fatal(err)
	}
	err = Migrate(ctx, db, "test", []string{`CREATE TABLE a (x)`})
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("err = %v, want a refusal naming the newer schema", err)
	}
}

func TestOpenRefusesMemory(t *testing.T) {
	if _, err := Open(context.Background(), ":memory:"); err == nil {
		t.Fatal("Open(:memory:) succeeded")
	}
}

func TestOpenUsesWriteAheadLog(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "usher.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Fatalf("journal_mode = %s, want wal", mode)
	}
}
