package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// Extensions lists every extension a task's file may have, the one
// definition every part of usher uses (the backend, the queue server, the
// render API, the shares API and /api/info). ".asy" is Asymptote source;
// the others are data a figure reads: tables for graph's input and
// csv/tsv readers (.csv .dat .txt .tsv .json), images for graphic()
// (.png .jpg .jpeg .eps .pdf), and .tex, a LaTeX file a figure's labels
// can \input (texpreamble("\input{macros.tex}")): latex runs inside the
// same sandbox and work directory, so it reads nothing asy could not.
// Extensions are matched as written: "photo.PNG" is refused.
var Extensions = []string{".asy", ".csv", ".dat", ".txt", ".tsv", ".json", ".tex", ".png", ".jpg", ".jpeg", ".eps", ".pdf"}

// BinaryExtensions are the extensions whose files are not text: the shares
// API and the web app carry them in base64.
var BinaryExtensions = []string{".png", ".jpg", ".jpeg", ".pdf"}

// SourceExtension is the extension of Asymptote source, which the main file
// must have.
const SourceExtension = ".asy"

// ErrNameExtension is CheckFileName's reason for a name whose extension is
// not in Extensions.
var ErrNameExtension = fmt.Errorf("file name extension is not allowed: the allowed extensions are %s",
	strings.Join(Extensions, " "))

// ErrMainNotSource refuses a main file that is not Asymptote source.
var ErrMainNotSource = errors.New(`the main file must be Asymptote source ending in ".asy"`)

// ErrNameReserved refuses a data file that asy's own output could clash
// with: asy writes out.<format> and out_* scratch files next to the
// task's files (bwrap.go, outputName), so an uploaded out.png could pass
// for the picture of a run that drew nothing.
var ErrNameReserved = errors.New(`file name is reserved for asy's output: a data file may not be named "out.*" or "out_*"`)

// Extension is name's extension as Extensions spells it ("" for none).
func Extension(name string) string { return path.Ext(name) }

// IsBinary reports whether name's extension is one of BinaryExtensions.
func IsBinary(name string) bool { return slices.Contains(BinaryExtensions, Extension(name)) }

// IsSource reports whether name is Asymptote source (ends in ".asy").
func IsSource(name string) bool { return Extension(name) == SourceExtension }

// checkExtension is CheckFileName's extension rule.
func checkExtension(name string) error {
	if !slices.Contains(Extensions, Extension(name)) {
		return ErrNameExtension
	}
	if !IsSource(name) && (strings.HasPrefix(name, outputName+".") || strings.HasPrefix(name, outputName+"_")) {
		return ErrNameReserved
	}
	return nil
}

// CheckMainName refuses a main file that is not Asymptote source.
func CheckMainName(name string) error {
	if !IsSource(name) {
		return fmt.Errorf("%w: %q", ErrMainNotSource, shortName(name))
	}
	return nil
}

// ContentError says that a file's bytes do not match its extension.
type ContentError struct {
	Name string // the file's name
	Want string // what its extension promises: "a PNG image", "UTF-8 text"…
	Why  string // what is wrong with the bytes
}

func (e *ContentError) Error() string {
	return fmt.Sprintf("file %q is not %s: %s", shortName(e.Name), e.Want, e.Why)
}

// signature is what a binary extension's files start with.
type signature struct {
	want     string
	prefixes []string
}

var signatures = map[string]signature{
	".png":  {"a PNG image", []string{"\x89PNG\r\n\x1a\n"}},
	".jpg":  {"a JPEG image", []string{"\xff\xd8\xff"}},
	".jpeg": {"a JPEG image", []string{"\xff\xd8\xff"}},
	".pdf":  {"a PDF document", []string{"%PDF-"}},
	// EPS: PostScript text, or the DOS EPS binary header (C5 D0 D3 C6)
	// that wraps PostScript with a TIFF or WMF preview.
	".eps": {"an EPS file", []string{"%!PS", "\xc5\xd0\xd3\xc6"}},
}

// CheckFileContent reports why data cannot be the content of a file named
// name (whose name CheckFileName accepted), or nil. Images and documents
// must start with their format's signature (PNG, JPEG FF D8 FF, "%PDF-",
// "%!PS" or the DOS EPS header); every other file is text: valid UTF-8
// without NUL bytes. The error is a *ContentError naming the file.
func CheckFileContent(name string, data []byte) error {
	if sig, ok := signatures[Extension(name)]; ok {
		for _, p := range sig.prefixes {
			if bytes.HasPrefix(data, []byte(p)) {
				return nil
			}
		}
		return &ContentError{Name: name, Want: sig.want, Why: "its content does not start with that format's signature"}
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return &ContentError{Name: name, Want: "text", Why: fmt.Sprintf("it contains a NUL byte at offset %d", i)}
	}
	if !utf8.Valid(data) {
		return &ContentError{Name: name, Want: "text", Why: "it is not valid UTF-8"}
	}
	return nil
}

// CheckFile is CheckFileName and CheckFileContent together: the checks
// every part applies to a file a client sends.
func CheckFile(name string, data []byte) error {
	if err := CheckFileName(name); err != nil {
		return err
	}
	return CheckFileContent(name, data)
}
