// Package texinfo lists what the installed TeX offers a label: the LaTeX
// packages (\usepackage or asy's usepackage) and the font families (NFSS
// .fd files) of the TeX trees, read from their ls-R databases at start-up
// (docs/api.md, "GET /api/tex").
package texinfo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// Family is one NFSS font family and the encodings it has .fd files for
// ("ptm": OT1, T1, TS1 is Times).
type Family struct {
	Name      string   `json:"name"`
	Encodings []string `json:"encodings"`
}

// Catalog is the body of GET /api/tex.
type Catalog struct {
	Packages     []string `json:"packages"`
	FontFamilies []Family `json:"fontFamilies"`
}

// Timeout bounds kpsewhich, which names the ls-R databases.
const Timeout = 10 * time.Second

// ErrNoTeX wraps every failure of Load.
var ErrNoTeX = errors.New("the TeX installation could not be read")

// encodings are the NFSS encodings whose .fd files name a family: an .fd
// file is <encoding><family>.fd. Longer prefixes first.
var encodings = []string{"ts1", "ot1", "oml", "oms", "omx", "ly1", "t2a", "t2b", "t2c", "lgr", "t1", "x2", "u"}

// Tree collects packages and font families from ls-R databases.
type Tree struct {
	packages map[string]bool
	families map[string]map[string]bool
}

// NewTree is an empty Tree.
func NewTree() *Tree {
	return &Tree{packages: map[string]bool{}, families: map[string]map[string]bool{}}
}

// ParseLsR adds what one ls-R database lists under tex/latex and
// tex/generic: *.sty as packages, <encoding><family>.fd as families. An
// ls-R is a "% ls-R" comment, then blocks of "DIR:" and its entries.
func (t *Tree) ParseLsR(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	latex := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "%"):
		case strings.HasSuffix(line, ":"):
			dir := strings.TrimSuffix(line, ":")
			latex = strings.Contains(dir+"/", "/tex/latex/") || strings.Contains(dir+"/", "/tex/generic/")
		case latex:
			t.add(line)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read ls-R: %w", err)
	}
	return nil
}

// add takes one file name of a LaTeX directory.
func (t *Tree) add(name string) {
	if base, ok := strings.CutSuffix(name, ".sty"); ok && plainName(base) {
		t.packages[base] = true
		return
	}
	base, ok := strings.CutSuffix(name, ".fd")
	if !ok {
		return
	}
	for _, enc := range encodings {
		if fam, ok := strings.CutPrefix(base, enc); ok && plainName(fam) {
			if t.families[fam] == nil {
				t.families[fam] = map[string]bool{}
			}
			t.families[fam][strings.ToUpper(enc)] = true
			return
		}
	}
}

// plainName accepts the names a user can type: letters, digits, - and _.
func plainName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Catalog is what the Tree holds, sorted.
func (t *Tree) Catalog() *Catalog {
	c := &Catalog{Packages: make([]string, 0, len(t.packages)), FontFamilies: []Family{}}
	for p := range t.packages {
		c.Packages = append(c.Packages, p)
	}
	sort.Strings(c.Packages)
	for name, encs := range t.families {
		f := Family{Name: name}
		for e := range encs {
			f.Encodings = append(f.Encodings, e)
		}
		sort.Strings(f.Encodings)
		c.FontFamilies = append(c.FontFamilies, f)
	}
	sort.Slice(c.FontFamilies, func(i, j int) bool { return c.FontFamilies[i].Name < c.FontFamilies[j].Name })
	return c
}

// Load asks kpsewhich for every ls-R database of the TeX installation and
// reads them all.
func Load(ctx context.Context) (*Catalog, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kpsewhich", "-all", "ls-R")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: kpsewhich -all ls-R: %v", ErrNoTeX, err)
	}
	t := NewTree()
	for _, path := range strings.Fields(string(out)) {
		if err := t.parseFile(path); err != nil {
			return nil, err
		}
	}
	c := t.Catalog()
	if len(c.Packages) == 0 {
		return nil, fmt.Errorf("%w: no LaTeX package in %s", ErrNoTeX, strings.Join(strings.Fields(string(out)), ", "))
	}
	return c, nil
}

func (t *Tree) parseFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoTeX, err)
	}
	defer f.Close()
	if err := t.ParseLsR(f); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNoTeX, path, err)
	}
	return nil
}
