package sandbox

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// snapshotDir describes every entry below root (name, type, mode, owner,
// and a hash of a file's contents), so that two snapshots differ when
// anything below root changed.
func snapshotDir(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		uid, gid := statOwner(fi)
		fmt.Fprintf(&b, "%s %v %d:%d", p, fi.Mode(), uid, gid)
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// sparseEqual reports whether a and b hold the same bytes.
func sparseEqual(a, b sparseFile) bool {
	return a.size == b.size && slices.EqualFunc(a.pages, b.pages, func(x, y filePage) bool {
		return x.off == y.off && bytes.Equal(x.data, y.data)
	})
}

// A sparse file keeps its size and its pages that are not zero, and
// writeSparse writes back the same bytes.
func TestSparseFileRoundTrip(t *testing.T) {
	t.Parallel()
	page := func(b byte) []byte { return bytes.Repeat([]byte{b}, indexPageSize) }
	r := newRunner(t, Limits{})
	for _, tc := range []struct {
		name  string
		data  []byte
		pages int
	}{
		{"empty", nil, 0},
		{"all zero", make([]byte, 3*indexPageSize), 0},
		{"first and last", slices.Concat(page(1), page(0), page(0), page(2)), 2},
		{"short last page", slices.Concat(page(0), []byte{0, 0, 7}), 1},
		{"one byte in the middle", slices.Concat(page(0), []byte{0, 9}, make([]byte, indexPageSize-2), page(0)), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			if err := os.WriteFile(src, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			sf, err := readSparse(src, maxIndexBytes)
			if err != nil {
				t.Fatal(err)
			}
			if sf.size != int64(len(tc.data)) || len(sf.pages) != tc.pages {
				t.Fatalf("size %d, %d pages; want %d, %d", sf.size, len(sf.pages), len(tc.data), tc.pages)
			}
			d, err := r.newWorkDir(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.remove()
			if err := r.writeSparse(d.fd, taskIndexName, sf); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(d.path, taskIndexName))
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("written back differently (%v)", err)
			}
		})
	}
	if _, err := readSparse(filepath.Join(t.TempDir(), "missing"), maxIndexBytes); err == nil {
		t.Error("read a missing file")
	}
}

// The template on disk: Mesa's layout with every two-hex-digit directory,
// the self-test's entries, an empty placeholder for the index, all owned
// by the server (when it is root, another uid than the sandbox's) and not
// writable by anyone else.
func TestShaderTemplateOnDisk(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	cache := r.template.cacheDir()
	if cache == "" || !strings.HasPrefix(filepath.Base(filepath.Dir(cache)), templatePrefix) ||
		filepath.Dir(filepath.Dir(cache)) != r.workRoot {
		t.Fatalf("template at %q, want %s/%s*/mesa_shader_cache", cache, r.workRoot, templatePrefix)
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 257 {
		t.Errorf("%d entries in the cache directory, want 256 directories and the index", len(entries))
	}
	files := 0
	err = filepath.WalkDir(filepath.Dir(cache), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o444)
		if fi.IsDir() {
			want = fs.ModeDir | 0o755
		} else {
			files++
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
		if uid, _ := statOwner(fi); uid != os.Geteuid() || (r.asRoot && uid == r.uid) {
			t.Errorf("%s: owner %d", p, uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(r.shaderCache.files) + 1; files != want || len(r.shaderCache.files) == 0 {
		t.Errorf("%d files, want the template's %d entries and the index", files, want-1)
	}
	if fi, err := os.Stat(filepath.Join(cache, shaderIndexName)); err != nil || fi.Size() != 0 {
		t.Errorf("index placeholder: %v", err)
	}
	if r.shaderCache.index.size == 0 || len(r.shaderCache.index.pages) == 0 {
		t.Error("the template has no index")
	}
}

// Inside a task's sandbox the template is a read-only mount, and the
// index it sees is its own copy, a read-write mount: a job with a shell
// (code execution through a bug in asy or TeX) can change nothing that
// another task reads, whatever it tries. (When the server is root the
// template's owner and modes refuse the job too, TestShaderTemplateOnDisk;
// the read-only mount is what holds when it is not.)
func TestShaderTemplateIsReadOnly(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	before := snapshotDir(t, filepath.Dir(r.template.cacheDir()))
	dir, err := r.newWorkDir(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.remove()
	mounts, err := r.shaderCacheMounts(dir)
	if err != nil {
		t.Fatal(err)
	}
	entry := path.Join("$C", r.shaderCache.files[0].Name)
	script := `C=$HOME/` + shaderCacheDir + ` e=` + entry + `
try() { if "$@" 2>/dev/null; then echo "WROTE: $*"; else echo "refused: $*"; fi; }
opts() { grep " $1 " /proc/self/mountinfo | cut -d' ' -f6 | cut -d, -f1; }
echo "template mount $(opts $C), index mount $(opts $C/index)"
test -f $e && echo entry-readable
try touch $C/new
try touch $C/00/new
try mkdir $C/new
try sh -c "echo x >> $e"
try truncate -s 0 $e
try rm -f $e
try mv $e $C/moved
try chmod 666 $e
try chown 65534 $C/00
try rmdir $C/00
try ln -s /etc $C/link
try umount $C
try mount -o remount,rw $C
printf x | dd of=$C/index bs=1 seek=8 conv=notrunc 2>/dev/null && echo index-writable
`
	out, code := sandboxedOn(t, r, dir, mounts, nil, "/bin/sh", "-c", script)
	if code != 0 || strings.Contains(out, "WROTE") || strings.Count(out, "refused") != 13 ||
		!strings.Contains(out, "template mount ro, index mount rw") ||
		!strings.Contains(out, "entry-readable") || !strings.Contains(out, "index-writable") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if after := snapshotDir(t, filepath.Dir(r.template.cacheDir())); after != before {
		t.Fatalf("the template changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	own, err := readSparse(filepath.Join(dir.path, taskIndexName), maxIndexBytes)
	if err != nil {
		t.Fatal(err)
	}
	if sparseEqual(own, r.shaderCache.index) {
		t.Fatal("the job's write to its index went elsewhere")
	}
}

// Mesa's writes stay the task's: a figure whose shaders the template lacks
// (other lights: asy writes their number into its shader sources) makes
// Mesa add keys to the task's own index and try to store its programs,
// which the read-only template refuses without a word to the user. The
// template is unchanged, and the next task (which loads three but draws
// nothing, so Mesa leaves its index alone) has the template's index again.
// (asy itself cannot write below its directory: "Write to other
// directories disabled"; only Mesa inside asy writes the cache.)
func TestShaderCacheIsPrivate(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	before := snapshotDir(t, filepath.Dir(r.template.cacheDir()))
	var indexes []sparseFile
	r.afterRun = func(workDir string) {
		index, err := readSparse(filepath.Join(workDir, taskIndexName), maxIndexBytes)
		if err != nil {
			t.Error(err)
		}
		indexes = append(indexes, index)
	}
	const lit = "import three; size(3cm); currentlight=White; draw(unitsphere, red);\n"
	for i, src := range []string{lit, "import three; write(\"nothing drawn\");"} {
		task := mainTask(src)
		task.Format = FormatPNG
		o, s := runTask(t, r, task)
		wantOutcome(t, o, i == 0, []string{"", "No image output"}[i], s)
		if out := s.Text(""); strings.Contains(out, "cache") {
			t.Errorf("task %d: %q", i+1, out)
		}
	}
	if sparseEqual(indexes[0], r.shaderCache.index) {
		t.Fatal("Mesa added nothing to the 3D task's index: the checks below prove nothing")
	}
	if !sparseEqual(indexes[1], r.shaderCache.index) {
		t.Fatal("the next task's index is not the template's")
	}
	if after := snapshotDir(t, filepath.Dir(r.template.cacheDir())); after != before {
		t.Fatalf("the template changed:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// The template holds the shader programs of the benchmark's sphere and of
// the test set's figures (figures3D), each rendered to a png that must
// show its scene (checkRendered), so that their tasks compile nothing
// or almost nothing: run with a private, writable copy of the template
// (copyShaderCache), a task adds to its copy only what Mesa did not find.
// The transparent cube with a label still misses one variant.
//
// New's template can lack an entry or two that Mesa did not store in time
// on a busy machine (renderTests), so the self-test figure is first
// rendered twice more on copies and what Mesa stores then is added: the
// check is of what the figure gives, not of how busy the machine was.
func TestShaderTemplateCoversFigures(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	r.copyShaderCache = true
	tpl := &shaderTemplate{files: slices.Clone(r.shaderCache.files), index: r.shaderCache.index}
	r.shaderCache = tpl // the Runners' shared template stays as it is
	var stored []File
	r.afterRun = func(workDir string) {
		cache, err := readShaderCache(workDir)
		if err != nil {
			t.Error(err)
			return
		}
		stored = cache.files
	}
	render := func(src string) {
		task := mainTask(src)
		task.Format = FormatPNG
		o, s := runTask(t, r, task)
		wantOutcome(t, o, true, "", s)
		if s.ImageCount() != 1 || !HasMagic(FormatPNG, s.Image(0)) {
			t.Fatalf("%d images, want one png", s.ImageCount())
		}
		checkRendered(t, FormatPNG, s.Image(0))
	}
	for range 2 {
		render(testFigure3D)
		addEntries(tpl, stored)
	}
	known := map[string]bool{}
	for _, f := range tpl.files {
		known[f.Name] = true
	}
	// What a figure may still miss: the transparent cube with a label needs
	// a variant of asy's blending pass that the template's pictures lack.
	allowed := map[string]int{"3D label with LaTeX": 1}
	figs := append([]struct{ name, src string }{{"benchmark sphere", sphere3D}}, figures3D...)
	for _, fig := range figs {
		render(fig.src)
		var added []string
		for _, f := range stored {
			if !known[f.Name] {
				added = append(added, f.Name)
			}
		}
		if len(added) > allowed[fig.name] {
			t.Errorf("%s: Mesa compiled %d programs the template lacks (at most %d expected): %v",
				fig.name, len(added), allowed[fig.name], added)
		}
	}
}

// addEntries adds to tpl the entries of files it lacks and reports whether
// there were any.
func addEntries(tpl *shaderTemplate, files []File) bool {
	known := map[string]bool{}
	for _, f := range tpl.files {
		known[f.Name] = true
	}
	added := false
	for _, f := range files {
		if !known[f.Name] {
			tpl.files = append(tpl.files, f)
			added = true
		}
	}
	return added
}

// addEntries, which tops up a template in TestShaderTemplateCoversFigures,
// adds only the entries the template lacks.
func TestShaderTemplateAdd(t *testing.T) {
	t.Parallel()
	f := func(name string) File { return File{Name: name, Data: []byte(name)} }
	for _, tc := range []struct {
		name      string
		have, add []File
		want      []string
		added     bool
	}{
		{"nothing new", []File{f("00/a"), f("01/b")}, []File{f("01/b")}, []string{"00/a", "01/b"}, false},
		{"one new", []File{f("00/a")}, []File{f("00/a"), f("02/c")}, []string{"00/a", "02/c"}, true},
		{"into empty", nil, []File{f("00/a")}, []string{"00/a"}, true},
		{"none", []File{f("00/a")}, nil, []string{"00/a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := &shaderTemplate{files: tc.have}
			if got := addEntries(tpl, tc.add); got != tc.added {
				t.Errorf("add reported %v", got)
			}
			var names []string
			for _, f := range tpl.files {
				names = append(names, f.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("files %v, want %v", names, tc.want)
			}
		})
	}
}
