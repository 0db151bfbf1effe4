package sqlitejobs

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobs/storetest"
	"github.com/usherhq/usher/internal/sqlitedb"
)

// The SQLite store passes the store conformance suite.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(t *testing.T) jobs.Store {
		path := filepath.Join(t.TempDir(), "usher.db")
		return func(t *testing.T) jobs.Store {
			db, err := sqlitedb.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(context.Background(), db, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(); db.Close() })
			return s
		}
	})
}
