// Package shares keeps shared projects: read-only snapshots of a set of
// Asymptote files, named by their content, kept in usher's SQLite file so
// that a share link works across restarts.
package shares

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sqlitedb"
)

// File is one file of a shared project.
type File struct {
	Filename string `json:"filename"`
	Main     bool   `json:"main"`
	Content  string `json:"content"`
}

// Errors of Check and Get.
var (
	ErrInvalid  = errors.New("invalid project")
	ErrTooLarge = errors.New("project too large")
	ErrNotFound = errors.New("no such share")
	ErrBadID    = errors.New("malformed share id")
)

// IDLength is the length of a share id: 16 bytes of SHA-256, base64url.
const IDLength = 22

var schema = []string{`
CREATE TABLE shares (
	id      TEXT PRIMARY KEY,
	files   TEXT NOT NULL,
	created INTEGER NOT NULL
);`}

// Store keeps shares in the SQLite file.
type Store struct {
	db       *sql.DB
	maxFiles int
	maxBytes int64
}

// Open prepares the shares table in db. A project may have at most
// maxFiles files of maxBytes of content in all.
func Open(ctx context.Context, db *sql.DB, maxFiles int, maxBytes int64) (*Store, error) {
	if err := sqlitedb.Migrate(ctx, db, "shares", schema); err != nil {
		return nil, err
	}
	return &Store{db: db, maxFiles: maxFiles, maxBytes: maxBytes}, nil
}

// MaxBytes is the most content one share may hold.
func (s *Store) MaxBytes() int64 { return s.maxBytes }

// Check reports why files cannot be shared, wrapping ErrInvalid or
// ErrTooLarge with a text naming the file or field.
func (s *Store) Check(files []File) error {
	if len(files) == 0 || len(files) > s.maxFiles {
		return fmt.Errorf("%w: \"files\" must hold 1 to %d files", ErrInvalid, s.maxFiles)
	}
	var total int64
	mains := 0
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		if err := sandbox.CheckFileName(f.Filename); err != nil {
			return fmt.Errorf("%w: \"filename\" %q: %v", ErrInvalid, f.Filename, err)
		}
		if seen[f.Filename] {
			return fmt.Errorf("%w: file %q twice", ErrInvalid, f.Filename)
		}
		seen[f.Filename] = true
		if !utf8.ValidString(f.Content) {
			return fmt.Errorf("%w: \"content\" of %q is not UTF-8", ErrInvalid, f.Filename)
		}
		if f.Main {
			mains++
		}
		total += int64(len(f.Content))
	}
	if mains != 1 {
		return fmt.Errorf("%w: exactly one file must have \"main\": true, %d do", ErrInvalid, mains)
	}
	if total > s.maxBytes {
		return fmt.Errorf("%w: %d bytes of content, at most %d", ErrTooLarge, total, s.maxBytes)
	}
	return nil
}

// ID names a project by its content: the same files (in any order) give
// the same id.
func ID(files []File) string {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Filename, b.Filename) })
	h := sha256.New()
	for _, f := range sorted {
		for _, part := range []string{f.Filename, fmt.Sprint(f.Main), f.Content} {
			binary.Write(h, binary.BigEndian, uint64(len(part)))
			h.Write([]byte(part))
		}
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// Put checks and stores files and returns their id; created is false when
// the same project was shared before.
func (s *Store) Put(ctx context.Context, files []File) (id string, created bool, err error) {
	if err := s.Check(files); err != nil {
		return "", false, err
	}
	id = ID(files)
	data, err := json.Marshal(files)
	if err != nil {
		return "", false, fmt.Errorf("shares: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO shares (id, files, created) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		id, string(data), time.Now().Unix())
	if err != nil {
		return "", false, fmt.Errorf("shares: put: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "", false, fmt.Errorf("shares: put: %w", err)
	}
	return id, n == 1, nil
}

// Get returns the files of a share.
func (s *Store) Get(ctx context.Context, id string) ([]File, error) {
	if !validID(id) {
		return nil, ErrBadID
	}
	var data string
	err := s.db.QueryRowContext(ctx, `SELECT files FROM shares WHERE id = ?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("shares: get: %w", err)
	}
	var files []File
	if err := json.Unmarshal([]byte(data), &files); err != nil {
		return nil, fmt.Errorf("shares: get %s: %w", id, err)
	}
	return files, nil
}

func validID(id string) bool {
	if len(id) != IDLength {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}
