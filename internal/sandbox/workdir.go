package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// workDir is a task's private work directory on the host: created 0700
// under the work root, owned by the sandbox uid, the only place the job can
// write, removed when the run ends. fd stays open for the whole run: files
// are written and images read relative to it, never by path.
type workDir struct {
	path string
	fd   int
}

// blockSize is what each directory entry costs at least against Limits.Disk,
// so that thousands of empty files count too.
const blockSize = 4096

// newWorkDir creates the work directory with the task's files and an empty
// HOME for asy, latex and dvisvgm.
func (r *Runner) newWorkDir(files []File) (*workDir, error) {
	path, err := os.MkdirTemp(r.workRoot, "usher-task-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: create the work directory: %w", err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.RemoveAll(path)
		return nil, fmt.Errorf("sandbox: open the work directory: %w", err)
	}
	d := &workDir{path: path, fd: fd}
	if err := r.fill(d, files); err != nil {
		_ = d.remove()
		return nil, fmt.Errorf("sandbox: prepare the work directory: %w", err)
	}
	return d, nil
}

// fill writes the files and HOME, all owned by the sandbox uid.
func (r *Runner) fill(d *workDir, files []File) error {
	if err := r.own(d.fd); err != nil {
		return err
	}
	for _, f := range files {
		if err := r.writeFile(d.fd, f); err != nil {
			return err
		}
	}
	if err := unix.Mkdirat(d.fd, homeName, 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", homeName, err)
	}
	if r.asRoot {
		if err := unix.Fchownat(d.fd, homeName, r.uid, r.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown %s: %w", homeName, err)
		}
	}
	return nil
}

// writeFile creates one task file; the name was checked by CheckFileName.
func (r *Runner) writeFile(dirfd int, f File) error {
	fd, err := unix.Openat(dirfd, f.Name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create %q: %w", f.Name, err)
	}
	file := os.NewFile(uintptr(fd), f.Name)
	defer file.Close()
	if err := r.own(fd); err != nil {
		return err
	}
	if _, err := file.Write(f.Data); err != nil {
		return fmt.Errorf("write %q: %w", f.Name, err)
	}
	return file.Close()
}

// own gives fd to the sandbox uid when the server is root.
func (r *Runner) own(fd int) error {
	if !r.asRoot {
		return nil
	}
	if err := unix.Fchown(fd, r.uid, r.gid); err != nil {
		return fmt.Errorf("chown to %d:%d: %w", r.uid, r.gid, err)
	}
	return nil
}

// remove deletes the work directory and everything the job left in it. The
// job is gone by then; a directory it made unreadable (possible when the
// server is not root) is made writable again first.
func (d *workDir) remove() error {
	if d.fd >= 0 {
		_ = unix.Close(d.fd)
		d.fd = -1
	}
	if err := os.RemoveAll(d.path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(d.path, func(p string, e fs.DirEntry, err error) error {
		if e != nil && e.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(d.path); err != nil {
		return fmt.Errorf("sandbox: remove the work directory: %w", err)
	}
	return nil
}

// errOverLimit stops usage's walk as soon as the total passes the limit.
var errOverLimit = errors.New("over the limit")

// usage adds up the work directory's files, each rounded up to whole
// blocks, and reports whether they pass limit. The walk uses openat and
// fstatat relative to directory fds and never follows a link; it stops
// at the limit, so its cost is bounded by limit/blockSize entries.
func (d *workDir) usage(limit int64) (int64, bool) {
	var total int64
	err := walkUsage(d.fd, 0, &total, limit)
	return total, errors.Is(err, errOverLimit)
}

func walkUsage(dirfd, depth int, total *int64, limit int64) error {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	dir := os.NewFile(uintptr(fd), ".")
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // gone meanwhile
		}
		*total += max((st.Size+blockSize-1)/blockSize*blockSize, st.Blocks*512, blockSize)
		if *total > limit {
			return errOverLimit
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR && depth < 16 {
			if err := walkSub(fd, name, depth, total, limit); err != nil {
				return err
			}
		}
	}
	return nil
}

func walkSub(dirfd int, name string, depth int, total *int64, limit int64) error {
	sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // not readable or replaced meanwhile: skip
	}
	defer unix.Close(sub)
	err = walkUsage(sub, depth+1, total, limit)
	if errors.Is(err, errOverLimit) {
		return err
	}
	return nil
}
