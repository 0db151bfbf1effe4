// Package asysyms asks the installed asy what it knows: its global
// functions and variables (asy -l), the types they use, and the modules
// of its system directory, for the editor's completion and hover
// (docs/api.md, "GET /api/symbols").
package asysyms

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Kinds of a Symbol.
const (
	KindFunction = "function"
	KindVariable = "variable"
	KindType     = "type"
)

// Symbol is one name asy knows, with the declaration asy prints for it.
// An overloaded function is one Symbol per signature.
type Symbol struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Signature string `json:"signature"`
}

// Catalog is the body of GET /api/symbols.
type Catalog struct {
	AsyVersion string   `json:"asyVersion"`
	Keywords   []string `json:"keywords"`
	Symbols    []Symbol `json:"symbols"`
	Modules    []string `json:"modules"`
}

// Keywords are the reserved words of asy's lexer (camp.l), which asy -l
// does not list.
var Keywords = []string{
	"access", "and", "atleast", "break", "continue", "controls", "curl",
	"cycle", "do", "else", "explicit", "false", "for", "from", "if",
	"import", "include", "new", "null", "operator", "private", "public",
	"quote", "restricted", "return", "static", "struct", "tension", "this",
	"true", "typedef", "unravel", "while",
}

// Timeout bounds each asy that Load runs.
const Timeout = 10 * time.Second

// maxListing bounds asy -l's output that Load reads (2.85 prints 180 KB).
const maxListing = 8 << 20

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseLine reads one line of asy -l, "TYPE NAME;" or "TYPE NAME(PARAMS)…;",
// into a Symbol; ok is false for anything else (operators, casts, blank or
// malformed lines). The signature is the line without its semicolon.
func ParseLine(line string) (s Symbol, ok bool) {
	line = strings.TrimSpace(line)
	decl, found := strings.CutSuffix(line, ";")
	if !found || strings.ContainsAny(decl, ";\n\r") {
		return Symbol{}, false
	}
	typ, rest, found := strings.Cut(decl, " ")
	if !found || typ == "" || strings.HasPrefix(typ, "(") {
		return Symbol{}, false
	}
	name, params, isFunc := strings.Cut(rest, "(")
	if !ident.MatchString(name) || name == "operator" {
		return Symbol{}, false
	}
	if isFunc && !strings.HasSuffix(params, ")") {
		return Symbol{}, false
	}
	kind := KindVariable
	if isFunc {
		kind = KindFunction
	}
	return Symbol{Name: name, Kind: kind, Signature: decl}, true
}

// Parse reads asy -l's listing: its functions and variables in the order
// asy printed them, each distinct line once, then the types their
// declarations return, sorted.
func Parse(r io.Reader) ([]Symbol, error) {
	var out []Symbol
	seen := map[string]bool{}
	types := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s, ok := ParseLine(sc.Text())
		if !ok || seen[s.Signature] {
			continue
		}
		seen[s.Signature] = true
		out = append(out, s)
		if t := baseType(s.Signature); t != "" {
			types[t] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read asy -l: %w", err)
	}
	names := make([]string, 0, len(types))
	for t := range types {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		out = append(out, Symbol{Name: t, Kind: KindType, Signature: t})
	}
	return out, nil
}

// baseType is the type name a declaration starts with, without array
// brackets or function parameters ("pen[] f(…)" → "pen"); "" when that
// is not a plain name.
func baseType(decl string) string {
	typ, _, _ := strings.Cut(decl, " ")
	typ, _, _ = strings.Cut(typ, "[")
	typ, _, _ = strings.Cut(typ, "(")
	if !ident.MatchString(typ) {
		return ""
	}
	return typ
}

// Modules lists the modules "import" can name from asy's system
// directory: its *.asy files, without the extension, sorted.
func Modules(sysdir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(sysdir, "*.asy"))
	if err != nil {
		return nil, fmt.Errorf("list asy modules: %w", err)
	}
	mods := make([]string, 0, len(paths))
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".asy")
		if ident.MatchString(name) {
			mods = append(mods, name)
		}
	}
	sort.Strings(mods)
	return mods, nil
}

// ErrNoAsy wraps every failure of Load: asy could not be asked.
var ErrNoAsy = errors.New("asy could not be asked for its symbols")

// Load asks asy (the binary asy, looked up in PATH when empty) for its
// listing and system directory, each run bounded by Timeout, with an
// empty environment and HOME in a temporary directory so that no user
// configuration changes the answer. version is asy's version line, which
// the caller already has.
func Load(ctx context.Context, asy, version string) (*Catalog, error) {
	if asy == "" {
		asy = "asy"
	}
	home, err := os.MkdirTemp("", "usher-asysyms-")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoAsy, err)
	}
	defer os.RemoveAll(home)
	// Both at once: each starts a whole asy.
	var sysdir []byte
	var sysdirErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sysdir, sysdirErr = runAsy(ctx, asy, home, "-noV", "-safe", "-c", "write(settings.sysdir);")
	}()
	listing, err := runAsy(ctx, asy, home, "-l")
	<-done
	if err != nil {
		return nil, err
	}
	if sysdirErr != nil {
		return nil, sysdirErr
	}
	syms, err := Parse(bytes.NewReader(listing))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoAsy, err)
	}
	if len(syms) == 0 {
		return nil, fmt.Errorf("%w: asy -l listed nothing", ErrNoAsy)
	}
	mods, err := Modules(strings.TrimSpace(string(sysdir)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoAsy, err)
	}
	return &Catalog{AsyVersion: version, Keywords: Keywords, Symbols: syms, Modules: mods}, nil
}

// runAsy runs asy with args under Timeout and returns its stdout.
func runAsy(ctx context.Context, asy, home string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, asy, args...)
	cmd.Dir = home
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "ASYMPTOTE_HOME=" + filepath.Join(home, ".asy")}
	var out, errOut limitedBuffer
	out.max, errOut.max = maxListing, 4<<10
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %s", Timeout)
		}
		return nil, fmt.Errorf("%w: asy %s: %v %s", ErrNoAsy, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	if out.over {
		return nil, fmt.Errorf("%w: asy %s printed more than %d bytes", ErrNoAsy, strings.Join(args, " "), maxListing)
	}
	return out.Bytes(), nil
}

// limitedBuffer keeps the first max bytes written and notes any more.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		p = p[:max(room, 0)]
	}
	b.Buffer.Write(p)
	return n, nil
}
