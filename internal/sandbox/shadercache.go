package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Mesa keeps compiled shaders in $HOME/.cache/mesa_shader_cache (HOME as
// displayScript tells it through MESA_SHADER_CACHE_DIR). A task's HOME is
// new and empty, so every 3D task would compile asy's shaders from
// scratch: about 0.1 s of CPU for a small figure (docs/benchmarks.md). New
// therefore keeps the cache that its own 3D self-test left behind (the
// template, written by the self-test's figures, never a user's), and every
// 3D task reads it:
//
//   - The template's entries are written once, at New, into a directory
//     of the Runner's under the work root (usher-mesa-*, owned by the
//     server, removed by Close), which each task's sandbox binds read-only
//     at HOME/.cache/mesa_shader_cache. Entries a task's figure needs and
//     the template lacks are compiled as before; Mesa's attempt to store
//     them fails on the read-only mount (silently: every two-hex-digit
//     directory Mesa might write into exists, so Mesa never tries to make
//     one and never reports that it could not), so nothing a task does
//     reaches the template or another task.
//   - Mesa's index (the cache's size and the keys of the GLSL sources it
//     has compiled, which let it skip compiling a source again) must be
//     writable: Mesa maps it read-write and disables the whole cache if it
//     cannot. Each task gets its own copy (.mesa-index in its work
//     directory, sparse, about 180 KiB), bound over the template's
//     placeholder. Without the index's keys Mesa compiles every GLSL
//     source again even when the linked program is cached.
//
// Insecure mode runs no self-test and has no template: its tasks start
// with an empty cache.

const (
	// shaderCacheDir is Mesa's cache directory under HOME.
	shaderCacheDir = ".cache/mesa_shader_cache"
	// shaderIndexName is Mesa's index file in its cache directory.
	shaderIndexName = "index"
	// taskIndexName is a task's own copy of the index in its work
	// directory; task files end in one of Extensions, so it cannot clash.
	taskIndexName = ".mesa-index"
	// templatePrefix names a Runner's template directory under the work
	// root.
	templatePrefix = "usher-mesa-"
)

// Bounds of the template, far above what asy's shaders need (about 60
// files, 0.5 MiB, and a 1.3 MB index).
const (
	maxCacheFiles = 512
	maxCacheBytes = 8 * miB
	maxIndexBytes = 4 * miB
	indexPageSize = 4096
)

// shaderTemplate is the shader cache New's self-test left.
type shaderTemplate struct {
	// files are Mesa's entries, named relative to the cache directory
	// (Mesa's layout: <2 hex digits>/<rest of the hash>).
	files []File
	// index is Mesa's index: its size and the pages that are not zero.
	index sparseFile
}

// sparseFile is a file of size bytes that is zero but for pages.
type sparseFile struct {
	size  int64
	pages []filePage
}

// filePage is data at offset off of a sparseFile.
type filePage struct {
	off  int64
	data []byte
}

// readShaderCache reads the cache a run left in the host work directory
// workDir: the regular files in the subdirectories of the cache directory,
// and the index. Links and anything deeper are left out.
func readShaderCache(workDir string) (*shaderTemplate, error) {
	root := filepath.Join(workDir, homeName, shaderCacheDir)
	files, err := readCacheEntries(root)
	if err != nil {
		return nil, fmt.Errorf("read the shader cache: %w", err)
	}
	index, err := readSparse(filepath.Join(root, shaderIndexName), maxIndexBytes)
	if err != nil {
		return nil, fmt.Errorf("read the shader cache's index: %w", err)
	}
	return &shaderTemplate{files: files, index: index}, nil
}

// readCacheEntries reads the regular files one level below root.
func readCacheEntries(root string) ([]File, error) {
	top, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var files []File
	var total int64
	for _, e := range top {
		if !e.IsDir() {
			continue
		}
		sub, err := os.ReadDir(filepath.Join(root, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, f := range sub {
			rel := path.Join(e.Name(), f.Name())
			fi, err := os.Lstat(filepath.Join(root, rel))
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil {
				return nil, err
			}
			total += int64(len(data))
			if len(files) >= maxCacheFiles || total > maxCacheBytes {
				return nil, fmt.Errorf("more than %d files or %d bytes", maxCacheFiles, maxCacheBytes)
			}
			files = append(files, File{Name: rel, Data: data})
		}
	}
	return files, nil
}

// readSparse reads a regular file of at most limit bytes, keeping the
// pages that are not all zero.
func readSparse(name string, limit int64) (sparseFile, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return sparseFile{}, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > limit {
		return sparseFile{}, fmt.Errorf("%s is not a regular file of at most %d bytes", name, limit)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return sparseFile{}, err
	}
	sf := sparseFile{size: int64(len(data))}
	zero := make([]byte, indexPageSize)
	for off := 0; off < len(data); off += indexPageSize {
		page := data[off:min(off+indexPageSize, len(data))]
		if !bytes.Equal(page, zero[:len(page)]) {
			sf.pages = append(sf.pages, filePage{off: int64(off), data: page})
		}
	}
	return sf, nil
}

// templateDir is a Runner's template on disk.
type templateDir struct {
	mu   sync.Mutex
	root string // the usher-mesa-* directory; "" before New wrote it and after Close
}

// cacheDir is the host path of the template's Mesa cache directory, or ""
// when there is none (not written, or removed by Close).
func (d *templateDir) cacheDir() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root == "" {
		return ""
	}
	return filepath.Join(d.root, path.Base(shaderCacheDir))
}

// remove deletes the template from disk; later tasks start with an empty
// cache.
func (d *templateDir) remove() error {
	d.mu.Lock()
	root := d.root
	d.root = ""
	d.mu.Unlock()
	if root == "" {
		return nil
	}
	if err := os.RemoveAll(root); err != nil {
		return fmt.Errorf("sandbox: remove the shader cache template: %w", err)
	}
	return nil
}

// writeTemplateDir writes r's shader cache template into a new directory
// under the work root, which tasks' sandboxes bind read-only: the
// entries, all 256 two-hex-digit directories Mesa may store into, and an
// empty placeholder for the index, on which each task's own index is
// bound. Directories are 0755 and files 0444, owned by the server: the
// sandbox uid can read them, and write them neither inside the sandbox
// (read-only mount) nor on the host (when the server is root, which makes
// the sandbox uid another uid).
func (r *Runner) writeTemplateDir() error {
	if r.shaderCache == nil || r.insecure {
		return nil
	}
	root, err := os.MkdirTemp(r.workRoot, templatePrefix)
	if err != nil {
		return fmt.Errorf("sandbox: shader cache template: %w", err)
	}
	if err := fillTemplateDir(root, r.shaderCache); err != nil {
		_ = os.RemoveAll(root)
		return fmt.Errorf("sandbox: shader cache template: %w", err)
	}
	r.template.mu.Lock()
	r.template.root = root
	r.template.mu.Unlock()
	return nil
}

// fillTemplateDir writes tpl below root (see writeTemplateDir). Modes are
// set with chmod, whatever the server's umask.
func fillTemplateDir(root string, tpl *shaderTemplate) error {
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	cache := filepath.Join(root, path.Base(shaderCacheDir))
	if err := mkdirMode(cache); err != nil {
		return err
	}
	for i := range 256 {
		if err := mkdirMode(filepath.Join(cache, fmt.Sprintf("%02x", i))); err != nil {
			return err
		}
	}
	for _, f := range tpl.files {
		if err := writeReadOnly(filepath.Join(cache, f.Name), f.Data); err != nil {
			return err
		}
	}
	return writeReadOnly(filepath.Join(cache, shaderIndexName), nil)
}

// mkdirMode creates the directory name with mode 0755.
func mkdirMode(name string) error {
	if err := os.Mkdir(name, 0o755); err != nil {
		return err
	}
	return os.Chmod(name, 0o755)
}

// writeReadOnly creates the file name holding data, with mode 0444.
func writeReadOnly(name string, data []byte) error {
	if err := os.WriteFile(name, data, 0o444); err != nil {
		return err
	}
	return os.Chmod(name, 0o444)
}

// shaderCacheMounts prepares the shader cache of a task that gets a
// display, in its fresh work directory d, and returns the bubblewrap
// arguments that mount it: the template read-only at HOME's cache
// directory, and the task's own copy of the index on the template's
// placeholder. With copyShaderCache (benchmarks and tests) the task gets
// a private copy of the template's entries in its HOME instead, and
// without a template (New's self-test, insecure mode, or after Close) an
// empty cache.
func (r *Runner) shaderCacheMounts(d *workDir) ([]string, error) {
	if r.shaderCache == nil || r.insecure {
		return nil, nil
	}
	if r.copyShaderCache {
		return nil, r.copyShaderTemplate(d)
	}
	cache := r.template.cacheDir()
	if cache == "" {
		return nil, nil
	}
	if err := r.writeSparse(d.fd, taskIndexName, r.shaderCache.index); err != nil {
		return nil, err
	}
	dest := path.Join(sandboxDir, homeName, shaderCacheDir)
	return []string{
		"--ro-bind", cache, dest,
		"--bind", filepath.Join(d.path, taskIndexName), path.Join(dest, shaderIndexName),
	}, nil
}

// writeSparse creates name in dirfd, owned by the sandbox uid, with the
// contents of sf: its size, and only its pages written.
func (r *Runner) writeSparse(dirfd int, name string, sf sparseFile) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	file := os.NewFile(uintptr(fd), name)
	defer file.Close()
	if err := r.own(fd); err != nil {
		return err
	}
	if err := file.Truncate(sf.size); err != nil {
		return fmt.Errorf("size %s: %w", name, err)
	}
	for _, p := range sf.pages {
		if _, err := file.WriteAt(p.data, p.off); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return file.Close()
}

// copyShaderTemplate writes the template's entries (not its index) into
// the HOME of the fresh work directory d, owned by the sandbox uid like
// the rest: a private, writable copy, as every task got before the
// template was bound read-only. The job has not started, so the paths
// hold nothing but what this function creates.
func (r *Runner) copyShaderTemplate(d *workDir) error {
	made := map[string]bool{}
	for _, f := range r.shaderCache.files {
		rel := path.Join(homeName, shaderCacheDir, f.Name)
		if err := r.mkdirs(d.fd, path.Dir(rel), made); err != nil {
			return err
		}
		if err := r.writeFile(d.fd, File{Name: rel, Data: f.Data}); err != nil {
			return err
		}
	}
	return nil
}

// mkdirs creates dir (relative to dirfd) and its parents below HOME, each
// once, owned by the sandbox uid.
func (r *Runner) mkdirs(dirfd int, dir string, made map[string]bool) error {
	if dir == homeName || dir == "." || made[dir] {
		return nil
	}
	if err := r.mkdirs(dirfd, path.Dir(dir), made); err != nil {
		return err
	}
	if err := unix.Mkdirat(dirfd, dir, 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	if r.asRoot {
		if err := unix.Fchownat(dirfd, dir, r.uid, r.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown %s: %w", dir, err)
		}
	}
	made[dir] = true
	return nil
}
