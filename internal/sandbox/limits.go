package sandbox

import (
	"fmt"
	"strconv"
	"time"
)

const (
	kiB = 1 << 10
	miB = 1 << 20
	giB = 1 << 30
)

// DefaultLimits returns the documented defaults:
//
//	Limit            Default  Why
//	AddressSpace     1 GiB    a small figure needs about 128 MiB of address space (asy's
//	                          garbage-collected heap, latex, gs), asy's 3D renderer (Mesa's
//	                          llvmpipe) about 700 MiB; 1 GiB leaves room for big graphs and
//	                          stops a memory bomb early
//	CPUTime          60 s     per process (asy, latex, gs each); a backstop equal to
//	                          MaxTimeout, the wall clock normally ends a run first
//	FileSize         32 MiB   largest file asy, latex, dvisvgm or gs may write: twice the image cap
//	Processes        32       per sandbox (its own user namespace); asy with latex and
//	                          dvisvgm or gs needs 5, threads included; a 3D task 10-12
//	                          (Xvfb, asy's renderer and llvmpipe's threads)
//	OpenFiles        256      asy keeps a handful open
//	Disk             128 MiB  all files of the work directory together, and /tmp's size
//	Output           1 MiB    stdout and stderr together
//	Image            16 MiB   a large png; svg and pdf of ordinary figures are far smaller
//	MaxTimeout       60 s     ordinary figures take 0.3-2 s; one backend runs one task at a time
//	InteractiveIdle  30 s     time to think between two commands in a web shell
//	Files            64       files of one task
//	Upload           1 MiB    all files of one task together; also the cap of input
//	                          queued for an interactive asy that is not reading
func DefaultLimits() Limits {
	return Limits{
		AddressSpace:    1 * giB,
		CPUTime:         60 * time.Second,
		FileSize:        32 * miB,
		Processes:       32,
		OpenFiles:       256,
		Output:          1 * miB,
		Image:           16 * miB,
		MaxTimeout:      60 * time.Second,
		InteractiveIdle: 30 * time.Second,
		Files:           64,
		Upload:          1 * miB,
		Disk:            128 * miB,
	}
}

// withDefaults fills the zero fields of l from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	pick(&l.AddressSpace, d.AddressSpace)
	pick(&l.CPUTime, d.CPUTime)
	pick(&l.FileSize, d.FileSize)
	pick(&l.Processes, d.Processes)
	pick(&l.OpenFiles, d.OpenFiles)
	pick(&l.Output, d.Output)
	pick(&l.Image, d.Image)
	pick(&l.MaxTimeout, d.MaxTimeout)
	pick(&l.InteractiveIdle, d.InteractiveIdle)
	pick(&l.Files, d.Files)
	pick(&l.Upload, d.Upload)
	pick(&l.Disk, d.Disk)
	return l
}

func pick[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// check refuses negative limits, which have no meaning.
func (l Limits) check() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"AddressSpace", l.AddressSpace}, {"CPUTime", int64(l.CPUTime)},
		{"FileSize", l.FileSize}, {"Processes", int64(l.Processes)},
		{"OpenFiles", int64(l.OpenFiles)}, {"Output", l.Output},
		{"Image", l.Image}, {"MaxTimeout", int64(l.MaxTimeout)},
		{"InteractiveIdle", int64(l.InteractiveIdle)}, {"Files", int64(l.Files)},
		{"Upload", l.Upload}, {"Disk", l.Disk},
	} {
		if f.v < 0 {
			return fmt.Errorf("sandbox: limit %s is negative", f.name)
		}
	}
	return nil
}

// prlimitArgs is the util-linux prlimit(1) command line that sets the
// rlimits of the command it then executes (asy), inherited by every child.
//
// Why prlimit inside the sandbox rather than setrlimit in our own process:
// Go cannot set rlimits for one child only, a limit set on bwrap would also
// bind bubblewrap's own setup, and RLIMIT_AS on a Go re-exec would fight the
// Go runtime's address space reservations. prlimit is a tiny C program in
// util-linux (Essential in Debian, so always there), it sets soft and hard
// limits, so asy cannot raise them again, and then execs asy.
//
// RLIMIT_NPROC counts the processes (threads included) of a real uid, per
// user namespace: every sandbox has its own user namespace, so each task
// gets its own count even though all of them run as the same host uid
// (checked by TestProcessLimitIsPerSandbox). Without a user namespace the
// count would be shared by every task of the uid, and for host root it is
// not enforced at all; that is why the server drops to an unprivileged uid.
// Insecure mode has no user namespace and therefore leaves RLIMIT_NPROC
// alone (it would count every process of the server's user).
//
// The CPU limit's hard value is one second above the soft one: the process
// gets SIGXCPU first (exit code 152) and SIGKILL a second later.
func (l Limits) prlimitArgs(prlimit string, withNproc bool) []string {
	cpu := int64((l.CPUTime + time.Second - 1) / time.Second)
	args := []string{
		prlimit,
		"--as=" + strconv.FormatInt(l.AddressSpace, 10),
		"--cpu=" + strconv.FormatInt(cpu, 10) + ":" + strconv.FormatInt(cpu+1, 10),
		"--fsize=" + strconv.FormatInt(l.FileSize, 10),
		"--nofile=" + strconv.Itoa(l.OpenFiles),
		"--core=0",
	}
	if withNproc {
		args = append(args, "--nproc="+strconv.Itoa(l.Processes))
	}
	return append(args, "--")
}

// timeout is the wall clock of a task that asked for t.
func (l Limits) timeout(t time.Duration) time.Duration {
	if t == 0 || t > l.MaxTimeout {
		return l.MaxTimeout
	}
	return t
}
