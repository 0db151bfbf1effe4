package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Why an image file could not be read back.
var (
	errNoImage     = errors.New("no image file")
	errNotRegular  = errors.New("image is not a regular file")
	errImageTooBig = errors.New("image is larger than the limit")
)

// stamp identifies one version of a file: asy rewriting its picture
// changes the inode (a new file) or the size, mtime or ctime.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// images reads the output file of one run from its work directory.
type images struct {
	dirfd int
	dir   string // host path, for the test hook only
	name  string // e.g. "out.svg"
	max   int64
	hook  func(workDir, imageName string)
}

// changed reports whether the file's stamp differs from last, without
// opening it. A missing file is not a change.
func (im *images) changed(last stamp) bool {
	var st unix.Stat_t
	if unix.Fstatat(im.dirfd, im.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	return stampOf(&st) != last
}

// imageExtensions are the formats asy can be made to write (by
// settings.outformat or shipout's format) besides the task's.
var imageExtensions = []string{"eps", "ps", "pdf", "svg", "png", "jpg", "gif", "tiff", "html", "v3d", "prc", "mp4", "webm"}

// otherImage is the name of a regular file out.<extension> in the work
// directory other than the image asy was asked for, or "".
func (im *images) otherImage() string {
	for _, ext := range imageExtensions {
		name := outputName + "." + ext
		var st unix.Stat_t
		if name != im.name && unix.Fstatat(im.dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
			st.Mode&unix.S_IFMT == unix.S_IFREG {
			return name
		}
	}
	return ""
}

// read returns the image's bytes and stamp. The file is opened relative to
// the work directory's fd with O_NOFOLLOW (a symlink the job left is
// refused, never followed) and O_NONBLOCK (a FIFO cannot block the open or
// the read); fstat on the open file then requires a regular file no larger
// than max, and at most max bytes are read even if it grows meanwhile.
func (im *images) read() ([]byte, stamp, error) {
	if im.hook != nil {
		im.hook(im.dir, im.name)
	}
	fd, err := unix.Openat(im.dirfd, im.name,
		unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, stamp{}, errNoImage
	case errors.Is(err, unix.ELOOP):
		return nil, stamp{}, errNotRegular
	case err != nil:
		return nil, stamp{}, fmt.Errorf("open %s: %w", im.name, err)
	}
	f := os.NewFile(uintptr(fd), im.name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, stamp{}, fmt.Errorf("fstat %s: %w", im.name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, stamp{}, errNotRegular
	}
	if st.Size > im.max {
		return nil, stamp{}, errImageTooBig
	}
	data, err := io.ReadAll(io.LimitReader(f, im.max+1))
	if err != nil {
		return nil, stamp{}, fmt.Errorf("read %s: %w", im.name, err)
	}
	if int64(len(data)) > im.max {
		return nil, stamp{}, errImageTooBig
	}
	return data, stampOf(&st), nil
}
