// Package sandbox runs one Asymptote task at a time inside bubblewrap: a
// private work directory as the only writable place, read-only system
// directories, no network, its own PID namespace, an unprivileged uid,
// resource limits and a wall clock that can only be shortened while the task
// runs. It knows nothing of WebSockets: the backend protocol (package
// backend) and the service drive it through Runner, Task, Sink and Run.
package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Formats asy can be asked for, as seed 001 names them.
const (
	FormatSVG = "svg"
	FormatPDF = "pdf"
	FormatPNG = "png"
)

// Streams an Output call names.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Limits bound one task. The zero value of a field means "use the default"
// of DefaultLimits.
type Limits struct {
	AddressSpace    int64         // RLIMIT_AS of asy and its children, bytes
	CPUTime         time.Duration // RLIMIT_CPU, rounded up to whole seconds
	FileSize        int64         // RLIMIT_FSIZE: largest file a task may write, bytes
	Processes       int           // RLIMIT_NPROC inside the sandbox
	OpenFiles       int           // RLIMIT_NOFILE
	Output          int64         // stdout and stderr together, bytes
	Image           int64         // largest image file read back, bytes
	MaxTimeout      time.Duration // wall clock of a task that names none, and the cap of any it names
	InteractiveIdle time.Duration // an interactive session with no input for this long ends
	Files           int           // most files in one task
	Upload          int64         // most bytes of all files of one task together
}

// Config sets up a Runner.
type Config struct {
	Limits   Limits
	WorkRoot string       // parent of the per-task work directories; os.TempDir() when empty
	Insecure bool         // run without bubblewrap; logs a warning on every task
	Logger   *slog.Logger // slog.Default() when nil
}

// File is one file of a task, written into the work directory before asy starts.
type File struct {
	Name string // checked by CheckFileName
	Data []byte
	Main bool // exactly one file of a task is the main file
}

// Task is what a client asked for. Format defaults to svg.
type Task struct {
	Files          []File
	Format         string
	Timeout        time.Duration // 0: Limits.MaxTimeout; larger values are capped to it
	SeparateStderr bool          // false: stderr is merged into stdout (seed default "stdout")
	Verbosity      int           // 0..3; 1..3 add -v, -vv, -vvv
	Interactive    bool          // asy reads stdin fed by Run.Input
}

// Sink receives a run's output as it happens. The runner never calls it
// concurrently. An error returned by Sink aborts the run.
type Sink interface {
	// Output forwards a chunk of stdout or stderr (Stdout or Stderr).
	Output(stream string, data []byte) error
	// Result forwards an image file asy wrote, in the task's format.
	Result(format string, image []byte) error
}

// Outcome is how a run ended. Error uses seed 001's texts exactly:
// "Execution aborted due to the time limit (<ms>ms)",
// "Execution aborted due to the output limit (<bytes>B)",
// "Execution failed with code <code>", "No image output".
type Outcome struct {
	Success bool
	Error   string
	Time    time.Duration
}

// ErrInvalidTask wraps every refusal of a Task before asy starts (bad file
// name, too many files, upload too large, no or two main files, bad format
// or verbosity); its text says which.
var ErrInvalidTask = errors.New("invalid task")

// DefaultLimits returns the documented defaults.
func DefaultLimits() Limits { panic("sandbox: not implemented") }

// CheckFileName reports why name cannot be a task's file name, or nil: it
// must end in ".asy", be at most 255 bytes, and contain no '/', '\\', "..",
// NUL or control characters.
func CheckFileName(name string) error { panic("sandbox: not implemented") }

// Runner starts tasks. It is safe for concurrent use; each Start gets its
// own sandbox.
type Runner struct{}

// New checks that the sandbox works (bubblewrap present, namespaces can be
// created, asy runs inside) and returns a Runner. Without Insecure, a failing
// check is an error naming the Debian package or the failing step.
func New(cfg Config) (*Runner, error) { panic("sandbox: not implemented") }

// Run is one started task.
type Run struct{}

// Start validates t, writes its files into a fresh work directory and starts
// asy. Cancelling ctx aborts the run. The sink receives output and images
// until Wait returns.
func (r *Runner) Start(ctx context.Context, t Task, sink Sink) (*Run, error) {
	panic("sandbox: not implemented")
}

// Shorten lowers the wall-clock limit to timeout counted from the start of
// the run, if that is earlier than the current limit; a later limit is
// ignored. A limit already passed stops the run at once.
func (run *Run) Shorten(timeout time.Duration) { panic("sandbox: not implemented") }

// Input feeds data to asy's stdin. It fails for a task that is not
// interactive or has ended.
func (run *Run) Input(data []byte) error { panic("sandbox: not implemented") }

// Wait waits for the run to end and returns its outcome. When Wait returns,
// no process of the task is left and its work directory is gone.
func (run *Run) Wait() Outcome { panic("sandbox: not implemented") }
