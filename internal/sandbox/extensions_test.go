package sandbox

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// Every binary extension is an allowed one, and the refusal lists them all.
func TestExtensionsDefinition(t *testing.T) {
	t.Parallel()
	for _, ext := range BinaryExtensions {
		if !slices.Contains(Extensions, ext) {
			t.Errorf("binary extension %s is not allowed", ext)
		}
	}
	for _, ext := range Extensions {
		if !strings.Contains(ErrNameExtension.Error(), ext) {
			t.Errorf("the refusal %q does not list %s", ErrNameExtension, ext)
		}
		if err := CheckFileName("x" + ext); err != nil {
			t.Errorf("x%s refused: %v", ext, err)
		}
	}
	if !IsBinary("a.png") || IsBinary("a.csv") || IsBinary("a.eps") || !IsSource("a.asy") || IsSource("a.csv") {
		t.Error("IsBinary or IsSource is wrong")
	}
}

var pngSig = "\x89PNG\r\n\x1a\n"

func TestCheckFileContent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data string
		want       string // "" for accepted
	}{
		{"a.asy", "draw(unitcircle);", ""},
		{"d.csv", "x,y\n1,2\n", ""},
		{"d.csv", "", ""},
		{"d.txt", "ü€\n", ""},
		{"p.png", pngSig + "rest", ""},
		{"p.jpg", "\xff\xd8\xff\xe0", ""},
		{"p.jpeg", "\xff\xd8\xff\xdb", ""},
		{"p.pdf", "%PDF-1.5\n", ""},
		{"p.eps", "%!PS-Adobe-3.0 EPSF-3.0\n", ""},
		{"p.eps", "\xc5\xd0\xd3\xc6\x20\x00\x00\x00", ""},
		{"p.eps", "%!PS\n\xff\xfe binary in the middle", ""},
		{"p.png", "draw(unitcircle);", `file "p.png" is not a PNG image: its content does not start with that format's signature`},
		{"p.png", "", `file "p.png" is not a PNG image: its content does not start with that format's signature`},
		{"p.jpg", pngSig, `file "p.jpg" is not a JPEG image: its content does not start with that format's signature`},
		{"p.pdf", "%PDF", `file "p.pdf" is not a PDF document: its content does not start with that format's signature`},
		{"p.eps", "%PDF-1.5", `file "p.eps" is not an EPS file: its content does not start with that format's signature`},
		{"d.csv", pngSig, `file "d.csv" is not text: it is not valid UTF-8`},
		{"d.dat", "1 2\x003", `file "d.dat" is not text: it contains a NUL byte at offset 3`},
		{"a.asy", "\xe9t\xe9", `file "a.asy" is not text: it is not valid UTF-8`},
	} {
		err := CheckFileContent(tc.name, []byte(tc.data))
		got := ""
		if err != nil {
			got = err.Error()
			var ce *ContentError
			if !errors.As(err, &ce) || ce.Name != tc.name {
				t.Errorf("%s: %v is not a ContentError naming the file", tc.name, err)
			}
		}
		if got != tc.want {
			t.Errorf("CheckFileContent(%q, %q) = %q, want %q", tc.name, tc.data, got, tc.want)
		}
	}
}

// FuzzCheckFileContent: accepted content has what its extension promises
// (the signature of a binary format, or UTF-8 text without NUL), and
// refused content has a ContentError naming the file.
func FuzzCheckFileContent(f *testing.F) {
	for _, s := range []string{"", "x,y\n", pngSig, "\xff\xd8\xff", "%PDF-", "%!PS", "\xc5\xd0\xd3\xc6", "\x00", "\xff"} {
		for _, ext := range Extensions {
			f.Add("f"+ext, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if CheckFileName(name) != nil {
			return
		}
		err := CheckFileContent(name, data)
		if err != nil {
			var ce *ContentError
			if !errors.As(err, &ce) || ce.Name != name {
				t.Fatalf("%q: %v is not a ContentError naming the file", name, err)
			}
			return
		}
		if sig, ok := signatures[Extension(name)]; ok {
			if !slices.ContainsFunc(sig.prefixes, func(p string) bool { return bytes.HasPrefix(data, []byte(p)) }) {
				t.Fatalf("%q accepted without its signature: %q", name, data)
			}
			return
		}
		if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
			t.Fatalf("%q accepted as text: %q", name, data)
		}
	})
}

// BenchmarkCheckFileContent measures the content check of a 1 MiB text
// file (the whole upload cap), the costliest case: utf8.Valid over every
// byte.
func BenchmarkCheckFileContent(b *testing.B) {
	data := []byte(strings.Repeat("x,y,ü\n", (1<<20)/7))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := CheckFileContent("d.csv", data); err != nil {
			b.Fatal(err)
		}
	}
}
