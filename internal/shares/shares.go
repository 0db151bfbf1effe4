// Package shares keeps shared projects: read-only snapshots of a set of
// Asymptote files, named by their content, so that a share link works
// across restarts. Two stores keep them: the SQLite file in the embedded
// default (SQLite) and Redis in multi-node mode (Redis), so that every
// queue server opens every share (docs/redis.md, "What queue servers
// share"). Both apply the same rules: a retention counted from a share's
// last open, a quota on the bytes of all shares, and an operator's delete.
package shares

import (
	"context"
	"crypto/sha256"
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
)

// File is one file of a shared project, as the API carries it: a text
// file's content as it is, a binary one's (sandbox.BinaryExtensions, or
// bytes that are not UTF-8 text, as in an EPS with a binary preview) in
// base64 with Encoding "base64".
type File struct {
	Filename string `json:"filename"`
	Main     bool   `json:"main"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
}

// EncodingBase64 is File.Encoding of a file whose content is base64.
const EncodingBase64 = "base64"

// Data returns the file's bytes, decoding base64.
func (f File) Data() ([]byte, error) {
	switch f.Encoding {
	case "":
		return []byte(f.Content), nil
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(f.Content)
		if err != nil {
			return nil, fmt.Errorf("\"content\" of %q is not base64: %w", f.Filename, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("\"encoding\" of %q must be \"base64\" or absent", f.Filename)
}

// FileOf is the API form of a file: base64 for a binary extension or
// bytes that are not UTF-8 text, the text itself otherwise.
func FileOf(name string, main bool, data []byte) File {
	if sandbox.IsBinary(name) || !utf8.Valid(data) {
		return File{Filename: name, Main: main, Content: base64.StdEncoding.EncodeToString(data), Encoding: EncodingBase64}
	}
	return File{Filename: name, Main: main, Content: string(data)}
}

// Errors of the stores' methods.
var (
	ErrInvalid  = errors.New("invalid project")
	ErrTooLarge = errors.New("project too large")
	ErrNotFound = errors.New("no such share")
	ErrBadID    = errors.New("malformed share id")
	// ErrGone wraps the reason a share that existed is no longer kept:
	// it expired or the operator deleted it.
	ErrGone = errors.New("share gone")
	// ErrFull is a new share refused because the shares' quota is used up.
	ErrFull = errors.New("share store full")
)

// Why a share is gone, as a tombstone records it.
const (
	goneExpired = "expired"
	goneDeleted = "deleted"
)

// GoneFor is how long a store remembers that a share expired or was
// deleted (and answers ErrGone); after that the id is simply unknown.
const GoneFor = 90 * 24 * time.Hour

// IDLength is the length of a share id: 16 bytes of SHA-256, base64url.
const IDLength = 22

// Store keeps shares. Both implementations are safe for concurrent use.
type Store interface {
	// MaxBytes is the most content one share may hold.
	MaxBytes() int64
	// Put checks and stores files and returns their id; created is false
	// when the same project is already shared (its age then restarts).
	// It fails with ErrInvalid, ErrTooLarge or ErrFull.
	Put(ctx context.Context, files []File) (id string, created bool, err error)
	// Get returns the files of a share and counts it as opened. It fails
	// with ErrBadID, ErrNotFound or ErrGone.
	Get(ctx context.Context, id string) ([]File, error)
	// Delete removes a share for good (ErrBadID, ErrNotFound).
	Delete(ctx context.Context, id string) error
	// Prune removes the shares past their retention and forgets
	// tombstones older than GoneFor; it returns how many shares expired.
	Prune(ctx context.Context) (int, error)
	// Usage returns how many shares are kept and their bytes.
	Usage(ctx context.Context) (count int, bytes int64, err error)
}

// Config sets the rules both stores apply.
type Config struct {
	MaxFiles int   // most files in one share
	MaxBytes int64 // most content bytes in one share
	// Retention: a share not opened (or shared again) for this long
	// expires; 0 keeps shares for good.
	Retention time.Duration
	// Quota bounds the stored bytes of all shares; a new share beyond it
	// is refused with ErrFull. 0: no bound.
	Quota int64
	Now   func() time.Time // the clock; time.Now when nil
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// storeError is one of the sentinel errors with the text a user reads.
type storeError struct {
	kind error
	msg  string
}

func (e *storeError) Error() string        { return e.msg }
func (e *storeError) Is(target error) bool { return target == e.kind }

// goneError is ErrGone with the reason, for the message a user reads.
func goneError(id, reason string, retention time.Duration) error {
	if reason == goneExpired {
		return &storeError{ErrGone, fmt.Sprintf("share %q has expired: it was not opened for %s", id, Days(retention))}
	}
	return &storeError{ErrGone, fmt.Sprintf("share %q was deleted by the operator", id)}
}

func fullError(used, size, quota int64) error {
	return &storeError{ErrFull, fmt.Sprintf(
		"the server's shares are full (%d of %d bytes; this project needs %d): no new share can be made now", used, quota, size)}
}

// Days writes a retention the way people count it: "30 days" when it is
// whole days, else Go's duration form.
func Days(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		if n := d / (24 * time.Hour); n != 1 {
			return fmt.Sprintf("%d days", n)
		}
		return "1 day"
	}
	return d.String()
}

// Check reports why files cannot be shared under c, wrapping ErrInvalid
// or ErrTooLarge with a text naming the file or field.
func (c Config) Check(files []File) error {
	_, err := c.normalize(files)
	return err
}

// normalize checks files under c and returns them in their canonical
// form (FileOf): the same bytes give the same stored form and id however
// the client encoded them. Sizes count decoded bytes.
func (c Config) normalize(files []File) ([]File, error) {
	if len(files) == 0 || len(files) > c.MaxFiles {
		return nil, fmt.Errorf("%w: \"files\" must hold 1 to %d files", ErrInvalid, c.MaxFiles)
	}
	var total int64
	var mains []string
	seen := make(map[string]bool, len(files))
	out := make([]File, 0, len(files))
	for _, f := range files {
		if err := sandbox.CheckFileName(f.Filename); err != nil {
			return nil, fmt.Errorf("%w: \"filename\" %q: %v", ErrInvalid, f.Filename, err)
		}
		if seen[f.Filename] {
			return nil, fmt.Errorf("%w: file %q twice", ErrInvalid, f.Filename)
		}
		seen[f.Filename] = true
		data, err := f.Data()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if err := sandbox.CheckFileContent(f.Filename, data); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if f.Main {
			mains = append(mains, f.Filename)
		}
		total += int64(len(data))
		out = append(out, FileOf(f.Filename, f.Main, data))
	}
	if len(mains) != 1 {
		return nil, fmt.Errorf("%w: exactly one file must have \"main\": true, %d do", ErrInvalid, len(mains))
	}
	if err := sandbox.CheckMainName(mains[0]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if total > c.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes of content, at most %d", ErrTooLarge, total, c.MaxBytes)
	}
	return out, nil
}

// ID names a project by its content: the same files (in any order) give
// the same id. Files must be in canonical form (FileOf): the id hashes the
// decoded bytes, so a text file's id is what it was before binary files.
func ID(files []File) string {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Filename, b.Filename) })
	h := sha256.New()
	for _, f := range sorted {
		content := f.Content
		if data, err := f.Data(); err == nil {
			content = string(data)
		}
		for _, part := range []string{f.Filename, fmt.Sprint(f.Main), content} {
			binary.Write(h, binary.BigEndian, uint64(len(part)))
			h.Write([]byte(part))
		}
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

func validID(id string) bool {
	if len(id) != IDLength {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}

// encode checks files under c and returns their id and stored form.
func (c Config) encode(files []File) (id string, data []byte, err error) {
	files, err = c.normalize(files)
	if err != nil {
		return "", nil, err
	}
	data, err = json.Marshal(files)
	if err != nil {
		return "", nil, fmt.Errorf("shares: %w", err)
	}
	return ID(files), data, nil
}

func decodeFiles(id string, data []byte) ([]File, error) {
	var files []File
	if err := json.Unmarshal(data, &files); err != nil {
		return nil, fmt.Errorf("shares: get %s: %w", id, err)
	}
	return files, nil
}
