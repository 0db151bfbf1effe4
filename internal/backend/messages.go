package backend

import (
	"fmt"
	"math"
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
	ErrBadFormat           = `option "format" must be "svg", "pdf" or "png"`
	ErrBadStderr           = `option "stderr" must be "separate" or "stdout"`
	ErrBadVerbosity        = `option "verbosity" must be 0, 1, 2 or 3`
	ErrBadTimeout          = `option "timeout" must be a positive number of milliseconds`
	ErrStartFailed         = "internal error: the task could not start"
	ErrInternal            = "internal error"
)

// Stderr option values (seed 001).
const (
	StderrSeparate = "separate"
	StderrStdout   = "stdout"
)

// addBody is add's JSON.
type addBody struct {
	Filename *string `json:"filename"`
	Main     *bool   `json:"main"`
}

// optionsBody is options' JSON; every option is optional.
type optionsBody struct {
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

// taskOptions are the options a client set, with seed 001's defaults.
type taskOptions struct {
	interactive bool
	timeout     time.Duration // 0: the runner's limit
	format      string
	separate    bool
	verbosity   int
}

func defaultOptions() taskOptions { return taskOptions{format: sandbox.FormatSVG} }

// apply checks and merges the options of one message sent before run.
func (o *taskOptions) apply(b optionsBody) error {
	if b.Format != nil {
		switch *b.Format {
		case sandbox.FormatSVG, sandbox.FormatPDF, sandbox.FormatPNG:
			o.format = *b.Format
		default:
			return refuse(ErrBadFormat)
		}
	}
	if b.Stderr != nil {
		switch *b.Stderr {
		case StderrSeparate, StderrStdout:
			o.separate = *b.Stderr == StderrSeparate
		default:
			return refuse(ErrBadStderr)
		}
	}
	if b.Verbosity != nil {
		if *b.Verbosity < 0 || *b.Verbosity > 3 {
			return refuse(ErrBadVerbosity)
		}
		o.verbosity = *b.Verbosity
	}
	if b.Timeout != nil {
		d, err := timeoutOf(*b.Timeout)
		if err != nil {
			return err
		}
		o.timeout = d
	}
	if b.Interactive != nil {
		o.interactive = *b.Interactive
	}
	return nil
}

// timeoutAfterRun returns the one option allowed after run.
func timeoutAfterRun(b optionsBody) (time.Duration, error) {
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
