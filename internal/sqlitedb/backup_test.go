package sqlitedb

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// openRows opens a data file with a table of numbered rows.
func openRows(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := Migrate(context.Background(), db, "rows", []string{
		`CREATE TABLE rows (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)`,
	}); err != nil {
		t.Fatal(err)
	}
	return db
}

// copyRows opens a backup read-only and returns its row count and
// highest id.
func copyRows(t *testing.T, path string) (count, maxID int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT count(*), coalesce(max(id), 0) FROM rows`).Scan(&count, &maxID); err != nil {
		t.Fatalf("reading the copy: %v", err)
	}
	return count, maxID
}

// A backup taken while another process keeps writing holds every row
// committed before it began, including rows only in the write-ahead log,
// and is one consistent snapshot that passes the integrity check.
func TestBackupWhileAnotherConnectionWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "usher.db")
	server := openRows(t, path)
	// The writer never checkpoints: what it commits stays in the WAL,
	// where copying the data file alone would miss it.
	writer := openRows(t, path)
	writer.SetMaxOpenConns(1)
	if _, err := writer.Exec(`PRAGMA wal_autocheckpoint = 0`); err != nil {
		t.Fatal(err)
	}
	var committed atomic.Int64
	insert := func() error {
		res, err := writer.Exec(`INSERT INTO rows (payload) VALUES (randomblob(2000))`)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		committed.Store(id)
		return err
	}
	// A few MB, so that the copy takes a while.
	res, err := writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000)
		INSERT INTO rows (payload) SELECT randomblob(2000) FROM n`)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := res.LastInsertId()
	committed.Store(last)
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			if err := insert(); err != nil {
				writerDone <- err
				return
			}
		}
	}()

	before := committed.Load()
	dest := filepath.Join(dir, "backup.db")
	err = Backup(ctx, server, dest)
	during := committed.Load() - before
	close(stop)
	if werr := <-writerDone; werr != nil {
		t.Fatalf("the writer failed while the backup ran: %v", werr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the writer committed %d rows while the backup ran", during)

	if err := Verify(ctx, dest); err != nil {
		t.Fatal(err)
	}
	count, maxID := copyRows(t, dest)
	if maxID < before {
		t.Fatalf("the copy ends at row %d; row %d was committed before the backup began", maxID, before)
	}
	if count != maxID {
		t.Fatalf("the copy holds %d rows with ids up to %d: not one snapshot", count, maxID)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".usher-backup-*"))
	if len(leftovers) > 0 {
		t.Fatalf("temporary files left beside the backup: %v", leftovers)
	}
	if _, err := os.Stat(dest + "-wal"); err == nil {
		t.Fatalf("the backup has a -wal file beside it")
	}
}

// A transaction still open during the backup is not in the copy, and the
// backup does not wait for it.
func TestBackupLeavesOutUncommittedWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "usher.db")
	server := openRows(t, path)
	if _, err := server.Exec(`INSERT INTO rows (payload) VALUES (x'01'), (x'02')`); err != nil {
		t.Fatal(err)
	}
	writer := openRows(t, path)
	tx, err := writer.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO rows (payload) VALUES (x'03')`); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "backup.db")
	if err := Backup(ctx, server, dest); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if count, _ := copyRows(t, dest); count != 2 {
		t.Fatalf("the copy holds %d rows, want the 2 committed before it", count)
	}
}

// A destination that exists is refused by name and left as it was; a
// missing directory is refused too. Nothing is left behind.
func TestBackupRefusesBadDestinations(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	server := openRows(t, filepath.Join(dir, "usher.db"))
	earlier := filepath.Join(dir, "earlier.db")
	if err := os.WriteFile(earlier, []byte("yesterday's backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dest, want string
	}{
		{"existing file", earlier, earlier + " exists"},
		{"the data file itself", filepath.Join(dir, "usher.db"), "usher.db exists"},
		{"a directory", sub, sub + " exists"},
		{"missing directory", filepath.Join(dir, "nope", "b.db"), "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Backup(ctx, server, tc.dest)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Backup(%s) = %v, want an error containing %q", tc.dest, err, tc.want)
			}
		})
	}
	if b, err := os.ReadFile(earlier); err != nil || string(b) != "yesterday's backup" {
		t.Fatalf("the existing backup now holds %.40q... (%v)", b, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".usher-backup-*"))
	if len(leftovers) > 0 {
		t.Fatalf("temporary files left behind: %v", leftovers)
	}
}

// A file that appears under the name while the copy is written is not
// replaced: the copy is refused at the last step and removed.
func TestBackupPublishNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	tmp, dest := filepath.Join(dir, ".usher-backup-1"), filepath.Join(dir, "b.db")
	for name, content := range map[string]string{tmp: "new", dest: "old"} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish(tmp, dest); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("publish over an existing file = %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "old" {
		t.Fatalf("the existing file now holds %.40q", b)
	}
}

// Verify tells a damaged file from a good one.
func TestBackupVerifyFindsDamage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	server := openRows(t, filepath.Join(dir, "usher.db"))
	if _, err := server.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 500)
		INSERT INTO rows (payload) SELECT randomblob(100) FROM n`); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.db")
	if err := Backup(ctx, server, good); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, good); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 3*4096 {
		t.Fatalf("the copy has %d bytes, want several pages", len(b))
	}
	for i := 4096 + 8; i < 4096+100; i++ { // the second page's cell pointers
		b[i] = 0xff
	}
	bad := filepath.Join(dir, "bad.db")
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, bad); err == nil || !strings.Contains(err.Error(), "integrity check") {
		t.Fatalf("Verify of a damaged file = %v, want the integrity check to fail", err)
	}
	if err := Verify(ctx, filepath.Join(dir, "missing.db")); err == nil {
		t.Fatal("Verify passed a missing file")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); err == nil {
		t.Fatal("Verify created the missing file")
	}
}
