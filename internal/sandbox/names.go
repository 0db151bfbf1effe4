package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxFileNameLen is the longest file name a task may use, in bytes.
const MaxFileNameLen = 255

// The reasons CheckFileName gives, one text each; the backend sends them to
// clients as they are.
var (
	ErrNameTooLong   = errors.New("file name is longer than 255 bytes")
	ErrNameSlash     = errors.New(`file name contains "/"`)
	ErrNameBackslash = errors.New(`file name contains "\"`)
	ErrNameDotDot    = errors.New(`file name contains ".."`)
	ErrNameNUL       = errors.New("file name contains a NUL byte")
	ErrNameControl   = errors.New("file name contains a control character")
	ErrNameUTF8      = errors.New("file name is not valid UTF-8")
)

// CheckFileName reports why name cannot be a task's file name, or nil: it
// must be at most 255 bytes, contain no '/', '\\', "..", NUL or control
// characters (C0, DEL and C1), be valid UTF-8, and end in one of Extensions
// (ErrNameExtension); a data file may not be named like asy's output
// (ErrNameReserved). The checks run in that order, length first: the first
// that fails is returned.
func CheckFileName(name string) error {
	switch {
	case len(name) > MaxFileNameLen:
		return ErrNameTooLong
	case strings.IndexByte(name, 0) >= 0:
		return ErrNameNUL
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return ErrNameControl
	case strings.IndexByte(name, '/') >= 0:
		return ErrNameSlash
	case strings.IndexByte(name, '\\') >= 0:
		return ErrNameBackslash
	case strings.Contains(name, ".."):
		return ErrNameDotDot
	case !utf8.ValidString(name):
		return ErrNameUTF8
	}
	return checkExtension(name)
}

// invalid wraps ErrInvalidTask with the reason.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidTask, fmt.Sprintf(format, args...))
}

// validate normalizes t (format, timeout) and refuses what cannot run.
func (l Limits) validate(t Task) (Task, error) {
	if err := l.checkFiles(t); err != nil {
		return t, err
	}
	if err := checkMain(t); err != nil {
		return t, err
	}
	switch t.Format {
	case "":
		t.Format = FormatSVG
	case FormatSVG, FormatPDF, FormatPNG, FormatHTML, FormatEPS, FormatV3D:
	default:
		return t, invalid("format %q is not svg, pdf, png, html, eps or v3d", t.Format)
	}
	if t.Verbosity < 0 || t.Verbosity > 3 {
		return t, invalid("verbosity %d is not 0, 1, 2 or 3", t.Verbosity)
	}
	if t.Timeout < 0 {
		return t, invalid("timeout %dms is negative", t.Timeout.Milliseconds())
	}
	t.Timeout = l.timeout(t.Timeout)
	return t, nil
}

// checkFiles checks names, duplicates, the file count, the upload size
// and each file's content against its extension.
func (l Limits) checkFiles(t Task) error {
	if len(t.Files) > l.Files {
		return invalid("%d files, more than the limit of %d", len(t.Files), l.Files)
	}
	seen := make(map[string]bool, len(t.Files))
	var total int64
	for _, f := range t.Files {
		if err := CheckFileName(f.Name); err != nil {
			return fmt.Errorf("%w: %w: %q", ErrInvalidTask, err, shortName(f.Name))
		}
		if seen[f.Name] {
			return invalid("file %q added twice", f.Name)
		}
		seen[f.Name] = true
		total += int64(len(f.Data))
	}
	if total > l.Upload {
		return invalid("%d bytes of files, more than the limit of %dB", total, l.Upload)
	}
	for _, f := range t.Files {
		if err := CheckFileContent(f.Name, f.Data); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidTask, err)
		}
	}
	return nil
}

// checkMain wants exactly one main file, Asymptote source, or at most one
// when interactive.
func checkMain(t Task) error {
	var mains []string
	for _, f := range t.Files {
		if f.Main {
			mains = append(mains, f.Name)
		}
	}
	switch {
	case len(mains) > 1:
		return invalid("two main files, %q and %q", mains[0], mains[1])
	case len(mains) == 0 && !t.Interactive:
		return invalid("no main file")
	case len(mains) == 1 && !t.Interactive:
		if err := CheckMainName(mains[0]); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidTask, err)
		}
	}
	return nil
}

// shortName keeps error texts short when a client sends a huge name.
func shortName(name string) string {
	if len(name) <= 64 {
		return name
	}
	return name[:64] + "..."
}

// mainFile is the name of t's main file, or "" when it has none.
func mainFile(t Task) string {
	for _, f := range t.Files {
		if f.Main {
			return f.Name
		}
	}
	return ""
}
