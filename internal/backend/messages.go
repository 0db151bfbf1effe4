package backend

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/coder/websocket"
	"github.com/usherhq/usher/internal/sandbox"
)

// Verbs of the backend protocol.
const (
	VerbAdd      = "add"
	VerbOptions  = "options"
	VerbRun      = "run"
	VerbInput    = "input"
	VerbResult   = "result"
	VerbOutput   = "output"
	VerbComplete = "complete"
)

// Incoming is every verb a client may send; Outgoing every verb the
// backend sends.
var (
	Incoming = []string{VerbAdd, VerbOptions, VerbRun, VerbInput}
	Outgoing = []string{VerbResult, VerbOutput, VerbComplete}
)

// Refusals the backend sends as complete's error; docs/protocol.md lists
// every text.
const (
	ErrBusy                = "backend busy"
	ErrShuttingDown        = "backend shutting down"
	ErrAddAfterRun         = "add after run"
	ErrRunTwice            = "run sent twice"
	ErrNoMain              = `no main file: mark one file "main": true`
	ErrNoFilename          = `add field "filename" is required`
	ErrInputBefore         = "input before run"
	ErrInputNotInteractive = "input without interactive mode"
	ErrBadFormat           = `option "format" must be "svg", "pdf", "png", "html", "eps" or "v3d"`
	ErrBadStderr           = `option "stderr" must be "separate" or "stdout"`
	ErrBadVerbosity        = `option "verbosity" must be 0, 1, 2 or 3`
	ErrBadTimeout          = `option "timeout" must be a positive number of milliseconds`
	ErrStartFailed         = "internal error: the task could not start"
	ErrInternal            = "internal error"
)

// Stderr option values (docs/design.md, "The backend protocol").
const (
	StderrSeparate = "separate"
	StderrStdout   = "stdout"
)

// addBody is add's JSON.
type addBody struct {
	Filename *string `json:"filename"`
	Main     *bool   `json:"main"`
}

// OptionsBody is the JSON of the options message, the same in the
// backend protocol and the queue protocol; every option is optional.
type OptionsBody struct {
	Interactive *bool   `json:"interactive"`
	Timeout     *int64  `json:"timeout"`
	Format      *string `json:"format"`
	Stderr      *string `json:"stderr"`
	Verbosity   *int    `json:"verbosity"`
}

// emptyBody is the JSON of run and input: nothing, or {}.
type emptyBody struct{}

// ResultBody is result's JSON.
type ResultBody struct {
	Format string `json:"format"`
}

// OutputBody is output's JSON.
type OutputBody struct {
	Stream string `json:"stream"`
}

// CompleteBody is complete's JSON. Time (ms) is there once asy ran.
type CompleteBody struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	Time    *int64 `json:"time,omitempty"`
}

// refusal ends a session with complete {success:false, error:text} and a
// close with code.
type refusal struct {
	text string
	code websocket.StatusCode
}

func (r *refusal) Error() string { return r.text }

// refuse makes a refusal of a client's mistake.
func refuse(format string, args ...any) *refusal {
	return &refusal{text: fmt.Sprintf(format, args...), code: websocket.StatusPolicyViolation}
}

func errTooManyFiles(limit int) *refusal {
	return refuse("too many files: the limit is %d", limit)
}

func errUploadTooLarge(limit int64) *refusal {
	return refuse("upload too large: the limit is %d bytes", limit)
}

func errInputTooLarge(limit int64) *refusal {
	return refuse("input too large: the limit is %d bytes", limit)
}

func errHeaderTooLarge(limit int64) *refusal {
	return refuse("header too large: the limit is %d bytes", limit)
}

func errDuplicateFile(name string) *refusal { return refuse("file %q added twice", name) }

func errTwoMains(a, b string) *refusal { return refuse("two main files: %q and %q", a, b) }

func errAfterRun(option string) *refusal {
	return refuse("option %q cannot change after run", option)
}

func errNoRun(limit time.Duration) *refusal {
	return refuse("no run within %dms", limit.Milliseconds())
}

// defaultOptions is a task with the protocol's default options and no files.
func defaultOptions() sandbox.Task { return sandbox.Task{Format: sandbox.FormatSVG} }

// Check refuses a format, stderr or verbosity value the protocol does not
// allow, with the text the client gets. The timeout's rule differs between
// the protocols; each checks it itself.
func (b OptionsBody) Check() error {
	if b.Format != nil {
		if !slices.Contains(sandbox.Formats, *b.Format) {
			return errors.New(ErrBadFormat)
		}
	}
	if b.Stderr != nil && *b.Stderr != StderrSeparate && *b.Stderr != StderrStdout {
		return errors.New(ErrBadStderr)
	}
	if b.Verbosity != nil && (*b.Verbosity < 0 || *b.Verbosity > 3) {
		return errors.New(ErrBadVerbosity)
	}
	return nil
}

// MergeInto sets the options b carries, except the timeout, on t.
func (b OptionsBody) MergeInto(t *sandbox.Task) {
	if b.Format != nil {
		t.Format = *b.Format
	}
	if b.Stderr != nil {
		t.SeparateStderr = *b.Stderr == StderrSeparate
	}
	if b.Verbosity != nil {
		t.Verbosity = *b.Verbosity
	}
	if b.Interactive != nil {
		t.Interactive = *b.Interactive
	}
}

// applyOptions checks the options of one message sent before run and
// merges them into t.
func applyOptions(t *sandbox.Task, b OptionsBody) error {
	if err := b.Check(); err != nil {
		return refuse("%s", err.Error())
	}
	if b.Timeout != nil {
		d, err := timeoutOf(*b.Timeout)
		if err != nil {
			return err
		}
		t.Timeout = d
	}
	b.MergeInto(t)
	return nil
}

// timeoutAfterRun returns the one option allowed after run.
func timeoutAfterRun(b OptionsBody) (time.Duration, error) {
	others := []struct {
		name string
		set  bool
	}{
		{"interactive", b.Interactive != nil}, {"format", b.Format != nil},
		{"stderr", b.Stderr != nil}, {"verbosity", b.Verbosity != nil},
	}
	for _, o := range others {
		if o.set {
			return 0, errAfterRun(o.name)
		}
	}
	if b.Timeout == nil {
		return 0, nil
	}
	return timeoutOf(*b.Timeout)
}

// timeoutOf converts positive milliseconds, saturating far-off ones.
func timeoutOf(ms int64) (time.Duration, error) {
	if ms <= 0 {
		return 0, refuse(ErrBadTimeout)
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}
