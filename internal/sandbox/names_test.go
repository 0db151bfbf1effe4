package sandbox

import (
	"errors"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

func TestCheckFileName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want error
	}{
		{"main.asy", nil},
		{"a b.asy", nil},
		{"-rf.asy", nil},
		{"ü.asy", nil},
		{".asy", nil},
		{strings.Repeat("a", 251) + ".asy", nil},
		{strings.Repeat("a", 252) + ".asy", ErrNameTooLong},
		{"main.txt", nil},
		{"data.csv", nil},
		{"photo.png", nil},
		{"main.asy.sh", ErrNameExtension},
		{"main.svg", ErrNameExtension},
		{"", ErrNameExtension},
		{"asy", ErrNameExtension},
		{"main.ASY", ErrNameExtension},
		{"photo.PNG", ErrNameExtension},
		{"out.png", ErrNameReserved},
		{"out_0.pdf", ErrNameReserved},
		{"out.csv", ErrNameReserved},
		{"out.asy", nil},
		{"outline.csv", nil},
		{"dir/main.asy", ErrNameSlash},
		{"/etc/main.asy", ErrNameSlash},
		{`dir\main.asy`, ErrNameBackslash},
		{"..asy", ErrNameDotDot},
		{"a..b.asy", ErrNameDotDot},
		{"a\x00.asy", ErrNameNUL},
		{"a\n.asy", ErrNameControl},
		{"a\t.asy", ErrNameControl},
		{"a\x1b[31m.asy", ErrNameControl},
		{"a\x7f.asy", ErrNameControl},
		{"a\u0085.asy", ErrNameControl},
		{"a\xff.asy", ErrNameUTF8},
	} {
		if got := CheckFileName(tc.name); got != tc.want {
			t.Errorf("CheckFileName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The reasons have distinct texts: the backend sends them to clients.
func TestFileNameReasonsAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, err := range []error{ErrNameExtension, ErrNameReserved, ErrNameTooLong, ErrNameSlash, ErrNameBackslash,
		ErrNameDotDot, ErrNameNUL, ErrNameControl, ErrNameUTF8} {
		if seen[err.Error()] {
			t.Errorf("text %q used twice", err)
		}
		seen[err.Error()] = true
	}
}

// FuzzCheckFileName: an accepted name has every property the runner
// relies on, and creating it in a directory creates exactly that one entry.
func FuzzCheckFileName(f *testing.F) {
	for _, s := range []string{"main.asy", "../x.csv", "out.png", "a.PNG", "x.tar.gz", "../x.asy", "a/b.asy", "a\\b.asy", "\x00.asy", ".asy", "ü.asy", "a\x85.asy"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, name string) {
		if CheckFileName(name) != nil {
			return
		}
		if !slices.Contains(Extensions, path.Ext(name)) || len(name) > MaxFileNameLen || strings.ContainsAny(name, "/\\\x00") ||
			strings.Contains(name, "..") || strings.IndexFunc(name, unicode.IsControl) >= 0 || !utf8.ValidString(name) {
			t.Fatalf("accepted %q", name)
		}
		dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dirfd)
		fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			t.Fatalf("create %q: %v", name, err)
		}
		unix.Close(fd)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != name {
			t.Fatalf("creating %q made %v", name, entries)
		}
		if err := unix.Unlinkat(dirfd, name, 0); err != nil {
			t.Fatal(err)
		}
	})
}

func TestStartRefusesInvalidTasks(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{Files: 3, Upload: 100})
	file := func(name string, main bool) File {
		return File{Name: name, Data: []byte("draw((0,0)--(1,1));"), Main: main}
	}
	for _, tc := range []struct {
		name string
		task Task
		want string
	}{
		{"bad name", Task{Files: []File{file("../x.asy", true)}}, `invalid task: file name contains "/": "../x.asy"`},
		{"extension", Task{Files: []File{file("x.sh", true)}}, `invalid task: file name extension is not allowed: the allowed extensions are .asy .csv .dat .txt .tsv .json .tex .png .jpg .jpeg .eps .pdf: "x.sh"`},
		{"main not .asy", Task{Files: []File{file("x.tex", true)}}, `invalid task: the main file must be Asymptote source ending in ".asy": "x.tex"`},
		{"png that is text", Task{Files: []File{file("a.asy", true), file("photo.png", false)}}, `invalid task: file "photo.png" is not a PNG image: its content does not start with that format's signature`},
		{"csv with NUL", Task{Files: []File{file("a.asy", true), {Name: "d.csv", Data: []byte("1,2\x00")}}}, `invalid task: file "d.csv" is not text: it contains a NUL byte at offset 3`},
		{"duplicate", Task{Files: []File{file("a.asy", true), file("a.asy", false)}}, `invalid task: file "a.asy" added twice`},
		{"too many files", Task{Files: []File{file("a.asy", true), file("b.asy", false), file("c.asy", false), file("d.asy", false)}}, "invalid task: 4 files, more than the limit of 3"},
		{"upload too big", Task{Files: []File{{Name: "a.asy", Data: make([]byte, 101), Main: true}}}, "invalid task: 101 bytes of files, more than the limit of 100B"},
		{"no main", Task{Files: []File{file("a.asy", false)}}, "invalid task: no main file"},
		{"no files", Task{}, "invalid task: no main file"},
		{"two mains", Task{Files: []File{file("a.asy", true), file("b.asy", true)}}, `invalid task: two main files, "a.asy" and "b.asy"`},
		{"two mains interactive", Task{Interactive: true, Files: []File{file("a.asy", true), file("b.asy", true)}}, `invalid task: two main files, "a.asy" and "b.asy"`},
		{"format", Task{Files: []File{file("a.asy", true)}, Format: "gif"}, `invalid task: format "gif" is not svg, pdf, png, html, eps or v3d`},
		{"format case", Task{Files: []File{file("a.asy", true)}, Format: "SVG"}, `invalid task: format "SVG" is not svg, pdf, png, html, eps or v3d`},
		{"verbosity high", Task{Files: []File{file("a.asy", true)}, Verbosity: 4}, "invalid task: verbosity 4 is not 0, 1, 2 or 3"},
		{"verbosity negative", Task{Files: []File{file("a.asy", true)}, Verbosity: -1}, "invalid task: verbosity -1 is not 0, 1, 2 or 3"},
		{"negative timeout", Task{Files: []File{file("a.asy", true)}, Timeout: -time.Second}, "invalid task: timeout -1000ms is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := r.Start(t.Context(), tc.task, sandboxtest.NewSink())
			if run != nil || !errors.Is(err, ErrInvalidTask) || err.Error() != tc.want {
				t.Fatalf("Start: %v, want %q wrapping ErrInvalidTask", err, tc.want)
			}
			if left := workRootEntries(t, r); len(left) != 0 {
				t.Fatalf("a refused task left %v in the work root", left)
			}
		})
	}
}

func TestStartRefusesNilSink(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	if _, err := r.Start(t.Context(), mainTask(figure), nil); err == nil {
		t.Fatal("started without a Sink")
	}
}

// Odd but valid names work as the main file and as imported files.
func TestFileNameTricks(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	for _, name := range []string{
		"-rf.asy", "--help.asy", "a b.asy", "ü.asy", ".asy", "out.asy", "out_.asy",
		`it's "quoted".asy`, "$(id).asy", "*.asy", ";.asy", "~.asy",
		strings.Repeat("n", 251) + ".asy",
	} {
		t.Run(name[:min(len(name), 20)], func(t *testing.T) {
			t.Parallel()
			task := Task{Files: []File{
				{Name: name, Data: []byte("import helper;\n" + figure), Main: true},
				{Name: "helper.asy", Data: []byte("draw((0,0)--(1,1));\n")},
			}}
			o, s := runTask(t, r, task)
			wantOutcome(t, o, true, "", s)
			if !HasMagic(FormatSVG, s.Image(0)) {
				t.Fatal("not an svg")
			}
		})
	}
}
