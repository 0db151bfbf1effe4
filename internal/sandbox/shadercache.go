package sandbox

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Mesa keeps compiled shaders in $HOME/.cache/mesa_shader_cache (HOME as
// displayScript tells it through MESA_SHADER_CACHE_DIR). A task's
// HOME is new and empty, so every 3D task would compile asy's shaders from
// scratch: about 0.1 s of CPU for a small figure (docs/benchmarks.md). New
// therefore keeps the cache that its own 3D self-test left behind, and
// every task starts with a private copy of it in its HOME, written like the
// task's files. Nothing is shared: a task that changes its copy changes
// only its own, gone with its work directory, and the template comes from
// the self-test's figure, never from a user's.

// shaderCacheDir is Mesa's cache directory under HOME.
const shaderCacheDir = ".cache/mesa_shader_cache"

// Bounds of the template, far above what asy's shaders need (about 40
// files, 0.5 MiB).
const (
	maxCacheFiles = 512
	maxCacheBytes = 8 * miB
)

// readShaderCache reads the cache a run left in the host work directory
// workDir: the regular files in the subdirectories of the cache directory
// (Mesa's layout is <2 hex digits>/<rest of the hash>), names relative to
// HOME. Links, anything deeper and the files at the top are left out: the
// top holds Mesa's index of the cache's size (a sparse 1.3 MB file), which
// Mesa creates anew when it is missing.
func readShaderCache(workDir string) ([]File, error) {
	root := filepath.Join(workDir, homeName, shaderCacheDir)
	var files []File
	var total int64
	add := func(rel string) error {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return fmt.Errorf("read the shader cache: %w", err)
		}
		total += int64(len(data))
		if len(files) >= maxCacheFiles || total > maxCacheBytes {
			return fmt.Errorf("the shader cache passes %d files or %d bytes", maxCacheFiles, maxCacheBytes)
		}
		files = append(files, File{Name: path.Join(shaderCacheDir, rel), Data: data})
		return nil
	}
	top, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read the shader cache: %w", err)
	}
	for _, e := range top {
		if !e.IsDir() {
			continue
		}
		sub, err := os.ReadDir(filepath.Join(root, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read the shader cache: %w", err)
		}
		for _, f := range sub {
			if err := add(path.Join(e.Name(), f.Name())); err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

// writeShaderCache writes the Runner's shader cache template into the HOME
// of the fresh work directory d of a task with a display, owned by the
// sandbox uid like the rest.
// The job has not started, so the paths hold nothing but what this
// function creates.
func (r *Runner) writeShaderCache(d *workDir) error {
	if len(r.shaderCache) == 0 {
		return nil
	}
	made := map[string]bool{}
	for _, f := range r.shaderCache {
		rel := path.Join(homeName, f.Name)
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
