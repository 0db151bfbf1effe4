// Package sandbox runs one Asymptote task at a time inside bubblewrap: a
// private work directory as the only writable place, read-only system
// directories, no network, its own PID namespace, an unprivileged uid,
// resource limits and a wall clock that can only be shortened while the task
// runs. It knows nothing of WebSockets: the backend protocol (package
// backend) and the service drive it through Runner, Task, Sink and Run.
//
// Files by concern: limits.go (defaults and rlimits), names.go (file names
// and task validation), preflight.go (New's checks), userns.go (what New
// says when namespaces are refused), bwrap.go (the
// bubblewrap and asy command lines), workdir.go (the private work
// directory), process.go (starting and killing the process tree), run.go
// (a run's lifecycle: wall clock, input, outcome), output.go (forwarding
// stdout and stderr, the output limit, interactive prompts), image.go
// (reading images without following links), and for 3D: detect3d.go
// (which tasks get a display), display.go (the task's private Xvfb),
// spare.go (displays started before the task that will use them) and
// shadercache.go (Mesa's shader cache template, bound read-only).
package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Formats asy can be asked for: the protocol's svg, pdf and png, and for 3D
// html (asy's WebGL page, self-contained), eps and v3d (asy's
// own 3D format, for download).
const (
	FormatSVG  = "svg"
	FormatPDF  = "pdf"
	FormatPNG  = "png"
	FormatHTML = "html"
	FormatEPS  = "eps"
	FormatV3D  = "v3d"
)

// Formats lists every format a Task may name.
var Formats = []string{FormatSVG, FormatPDF, FormatPNG, FormatHTML, FormatEPS, FormatV3D}

// Streams an Output call names.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Limits bound one task. The zero value of a field means "use the default"
// of DefaultLimits; limits.go documents the defaults and why.
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
	Disk            int64         // all files in the work directory together (and the size of /tmp), bytes
}

// Config sets up a Runner.
type Config struct {
	Limits   Limits
	WorkRoot string       // parent of the per-task work directories; os.TempDir() when empty
	Insecure bool         // run without bubblewrap; logs a warning on every task
	Logger   *slog.Logger // slog.Default() when nil

	// BwrapPath is the bubblewrap binary; "bwrap" looked up in PATH when empty.
	BwrapPath string
	// SandboxUID and SandboxGID are the host uid and gid the sandbox runs as
	// when the server runs as root; 0 means 65534 (nobody/nogroup). A server
	// that is not root runs the sandbox as its own uid, mapped to 65534
	// inside the sandbox's user namespace.
	SandboxUID, SandboxGID int
	// SpareDisplays is how many spare virtual displays for 3D tasks the
	// Runner keeps ready (spare.go), at most one per task that may run at
	// the same time; 0 means 1, a negative value none (every 3D task
	// starts its own). Insecure mode has none.
	SpareDisplays int
}

// File is one file of a task, written into the work directory before asy starts.
type File struct {
	Name string // checked by CheckFileName
	Data []byte
	Main bool // exactly one file of a task is the main file
}

// Task is what a client asked for. Format defaults to svg.
//
// An interactive task starts asy without a file: asy reads the commands fed
// by Run.Input. Its files are still written into the work directory (to be
// imported); a main flag on one of them is allowed and ignored.
type Task struct {
	Files          []File
	Format         string
	Timeout        time.Duration // 0: Limits.MaxTimeout; larger values are capped to it
	SeparateStderr bool          // false: stderr is merged into stdout (the protocol's default "stdout")
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

// Outcome is how a run ended. Error uses the backend protocol's texts
// exactly (docs/design.md, "The backend protocol"):
// "Execution aborted due to the time limit (<ms>ms)",
// "Execution aborted due to the output limit (<bytes>B)",
// "Execution failed with code <code>", "No image output".
//
// The output limit text also reports an image over Limits.Image and work
// directory files over Limits.Disk, each with that limit's bytes. A run
// cancelled through its context or aborted by a Sink error ends with
// "Execution aborted: <cause>"; nobody is usually left to read it.
type Outcome struct {
	Success bool
	Error   string
	Time    time.Duration
}

// ErrInvalidTask wraps every refusal of a Task before asy starts (bad file
// name, too many files, upload too large, no or two main files, bad format
// or verbosity); its text says which.
var ErrInvalidTask = errors.New("invalid task")

// Runner starts tasks. It is safe for concurrent use; each Start gets its
// own sandbox.
type Runner struct {
	limits   Limits
	workRoot string
	insecure bool
	log      *slog.Logger
	tools    tools
	asRoot   bool // the server is root: bubblewrap is started as uid/gid
	uid, gid int
	rootfs   []string // bubblewrap arguments that build the read-only root
	render3D render3D // how asy renders 3D; render3DOpenGL but in benchmarks
	rule3D   rule3D   // which tasks get a virtual display; the zero value: all
	// displayReady starts asy only once its Xvfb is ready, not as soon as
	// Xvfb's socket exists (display.go). Only the benchmarks set it, to
	// compare.
	displayReady bool

	// spares are the spare displays for 3D tasks (spare.go); nil: none.
	spares *spares

	// shaderCache is the template of Mesa's shader cache that New's
	// self-test left (shadercache.go); shared by Runners, never modified.
	shaderCache *shaderTemplate
	// template is the Runner's copy of shaderCache on disk, which tasks'
	// sandboxes bind read-only.
	template templateDir
	// copyShaderCache gives each task a private, writable copy of the
	// template's entries in its HOME instead, as before the read-only
	// template: only the benchmarks (to compare) and the tests (to see
	// which entries a figure adds) set it.
	copyShaderCache bool
	// afterRun, when set, sees the host work directory after the run,
	// just before it is removed. New's self-test takes the shader cache.
	afterRun func(workDir string)

	// beforeImage, when set, runs before each attempt to read the image
	// file from the work directory (host path). Tests use it to plant
	// faults asy itself cannot produce (a symlink, FIFO or directory in
	// place of the image).
	beforeImage func(workDir, imageName string)
}

// Close kills the Runner's spare displays, those of running tasks too, and
// starts no more, and removes its shader cache template from the work
// root: call it once no task runs. Tasks started later start their own
// displays, with an empty shader cache. It fails only when the template
// cannot be removed.
func (r *Runner) Close() error {
	if r.spares != nil {
		r.spares.close()
	}
	return r.template.remove()
}

// Run is one started task.
type Run struct {
	r     *Runner
	task  Task
	sink  Sink
	ctx   context.Context
	dir   *workDir
	proc  *process
	out   *forwarder
	in    *feeder // nil unless interactive
	spare *spare  // the spare display the task got, or nil
	// mounts are the task's bubblewrap mounts of the shader cache
	// (shaderCacheMounts), or nil.
	mounts []string
	start  time.Time

	mu      sync.Mutex
	limit   time.Duration // current wall-clock limit, counted from start
	wake    chan struct{} // Shorten and Input nudge the supervisor
	abortCh chan string   // the forwarder asks the supervisor to abort
	idled   bool          // the idle clock closed the input (set by watch, read after it)

	done    chan struct{}
	outcome Outcome
}
