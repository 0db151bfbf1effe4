package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A virtual display costs about 50 ms of CPU and 60-100 ms of wall clock
// per task (docs/benchmarks.md), a sixth of a small 2D figure, so a task
// gets one only when it may render 3D. asy renders 3D only once module
// three is loaded, and a module is loaded only by naming it: import,
// access, from, unravel or include of three or of a module that loads
// three, in a task file or in asy's own modules. So a task gets a display
// when one of its files names such a module, or could run code it builds
// at run time (eval, execute), or is interactive (its code is not known
// in advance). Comments and strings are not told apart: a mention there
// only costs the display's start. Text data files (.csv, .txt, .tex…) are
// scanned too, since a figure can eval what it reads from them; images and
// PDFs (BinaryExtensions) are not code, and random bytes in them could
// spell a module's name.

// moduleName matches what import, access, include, unravel and from name
// in asy's own modules (a bare name or a quoted path).
var moduleName = regexp.MustCompile(`\b(?:import|access|include|unravel|from)\s+"?([A-Za-z0-9_]+)`)

// rule3D decides which tasks get a virtual display.
type rule3D struct {
	always bool           // asy's modules could not be read: every task gets one
	words  *regexp.Regexp // a file matching it may render 3D
}

// needsDisplay reports whether t may render 3D.
func (d rule3D) needsDisplay(t Task) bool {
	if d.always || d.words == nil || t.Interactive {
		return true
	}
	for _, f := range t.Files {
		if !IsBinary(f.Name) && d.words.Match(f.Data) {
			return true
		}
	}
	return false
}

// newRule3D reads asy's system directory (asy -environment names it) and
// finds the modules that load three, directly or through others.
func newRule3D(asy string) (rule3D, error) {
	dir, err := asySysdir(asy)
	if err != nil {
		return rule3D{always: true}, err
	}
	mods, err := modules3D(dir)
	if err != nil {
		return rule3D{always: true}, err
	}
	return rule3D{words: words3D(mods)}, nil
}

// words3D matches a name of mods as a word, or followed by "_" and more
// (three_surface is a part of three), or eval or execute.
func words3D(mods []string) *regexp.Regexp {
	quoted := make([]string, len(mods))
	for i, m := range mods {
		quoted[i] = regexp.QuoteMeta(m)
	}
	return regexp.MustCompile(`\b(?:eval|execute|(?:` + strings.Join(quoted, "|") + `)(?:_\w*)?)\b`)
}

// asySysdir asks asy for its system directory, where its modules are.
func asySysdir(asy string) (string, error) {
	out, err := exec.Command(asy, "-environment").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("asy -environment: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "-sysdir" {
			return strings.Trim(f[1], "[]"), nil
		}
	}
	return "", fmt.Errorf("asy -environment names no -sysdir")
}

// modules3D lists three and the modules of dir that load it, directly or
// through other modules of dir, sorted.
func modules3D(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.asy"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no asy modules in %s (%v)", dir, err)
	}
	deps := map[string][]string{}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read asy module: %w", err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".asy")
		for _, m := range moduleName.FindAllSubmatch(src, -1) {
			deps[name] = append(deps[name], string(m[1]))
		}
	}
	return closure(deps, "three"), nil
}

// closure is root and every key of deps that reaches it, sorted.
func closure(deps map[string][]string, root string) []string {
	in := map[string]bool{root: true}
	for changed := true; changed; {
		changed = false
		for name, uses := range deps {
			if !in[name] && slices.ContainsFunc(uses, func(u string) bool { return in[u] }) {
				in[name], changed = true, true
			}
		}
	}
	out := make([]string, 0, len(in))
	for name := range in {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
