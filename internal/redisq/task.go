package redisq

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
)

// TaskTTL is how long a task's keys live unless their owner keeps them
// alive (600 seconds, as the key schema says).
const TaskTTL = 600 * time.Second

// Fields of the task hash.
const (
	// Written by the queue server.
	FieldDuration    = "duration"    // ms of the chosen tier; "0" for a default task
	FieldInteractive = "interactive" // "1" for an interactive task
	FieldFormat      = "format"
	FieldStderr      = "stderr" // "stdout" (merged) or "separate"
	FieldVerbosity   = "verbosity"
	FieldMain        = "main" // the main file's name
	FieldFrontend    = "frontend"
	// Written by the scheduler.
	FieldTimeout  = "timeout"  // ms the run may last: its tier's, lowered by downgrades
	FieldStarted  = "started"  // unix ms when it left the queue
	FieldPosition = "position" // tasks ahead of it, with each estimate
	// Written by the backend that took it.
	FieldBackend = "backend"
	FieldAddress = "address" // its WebSocket URL, as on task:ID:backend
)

// TaskOptions is what the task hash says about a task besides its files.
type TaskOptions struct {
	// Duration is the chosen tier's duration; 0 for a default task. For an
	// interactive task it is the client's timeout, which bounds its run.
	Duration time.Duration
	// Timeout is the limit of the tier the scheduler gave the task (the
	// task hash's "timeout"), 0 until it left the queue. A default task
	// runs within it.
	Timeout        time.Duration
	Interactive    bool
	Format         string
	SeparateStderr bool
	Verbosity      int
	Main           string
}

// OptionsOf returns t's options for the task hash.
func OptionsOf(t sandbox.Task) TaskOptions {
	o := TaskOptions{Duration: t.Timeout, Interactive: t.Interactive, Format: t.Format,
		SeparateStderr: t.SeparateStderr, Verbosity: t.Verbosity}
	for _, f := range t.Files {
		if f.Main {
			o.Main = f.Name
		}
	}
	return o
}

// Fields returns o as task hash fields.
func (o TaskOptions) Fields() map[string]any {
	stderr := "stdout"
	if o.SeparateStderr {
		stderr = "separate"
	}
	m := map[string]any{
		FieldDuration:  o.Duration.Milliseconds(),
		FieldFormat:    o.Format,
		FieldStderr:    stderr,
		FieldVerbosity: o.Verbosity,
		FieldMain:      o.Main,
	}
	if o.Interactive {
		m[FieldInteractive] = "1"
	}
	return m
}

// ParseOptions reads a task hash. Unknown fields are ignored.
func ParseOptions(h map[string]string) (TaskOptions, error) {
	var o TaskOptions
	ms, err := strconv.ParseInt(h[FieldDuration], 10, 64)
	if err != nil || ms < 0 {
		return o, fmt.Errorf("task hash: bad %s %q", FieldDuration, h[FieldDuration])
	}
	o.Duration = time.Duration(ms) * time.Millisecond
	if v := h[FieldTimeout]; v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return o, fmt.Errorf("task hash: bad %s %q", FieldTimeout, v)
		}
		o.Timeout = time.Duration(ms) * time.Millisecond
	}
	o.Interactive = h[FieldInteractive] == "1"
	o.Format = h[FieldFormat]
	o.SeparateStderr = h[FieldStderr] == "separate"
	if v := h[FieldVerbosity]; v != "" {
		if o.Verbosity, err = strconv.Atoi(v); err != nil {
			return o, fmt.Errorf("task hash: bad %s %q", FieldVerbosity, v)
		}
	}
	o.Main = h[FieldMain]
	return o, nil
}

// Task builds the sandbox task from the options and the files hash; its
// time limit is the scheduler's timeout when there is one.
func (o TaskOptions) Task(files map[string]string) sandbox.Task {
	t := sandbox.Task{Timeout: o.Duration, Interactive: o.Interactive, Format: o.Format,
		SeparateStderr: o.SeparateStderr, Verbosity: o.Verbosity}
	if o.Timeout > 0 {
		t.Timeout = o.Timeout
	}
	if o.Interactive { // no tier: the client's timeout, 0 for the backend's maximum
		t.Timeout = o.Duration
	}
	for name, data := range files {
		t.Files = append(t.Files, sandbox.File{Name: name, Data: []byte(data), Main: name == o.Main})
	}
	return t
}

// FormatEstimate writes a wait for task:ID:queue.estimate: float seconds,
// "inf" while no backend could run the task.
func FormatEstimate(wait time.Duration, known bool) string {
	if !known {
		return "inf"
	}
	return strconv.FormatFloat(wait.Seconds(), 'f', 3, 64)
}

// ParseEstimate reads an element of task:ID:queue.estimate.
func ParseEstimate(s string) (wait time.Duration, known bool, err error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, false, fmt.Errorf("queue estimate %q: not a number of seconds", s)
	}
	if math.IsInf(f, 1) {
		return 0, false, nil
	}
	if f >= float64(math.MaxInt64)/float64(time.Second) {
		return 0, false, fmt.Errorf("queue estimate %q: out of range", s)
	}
	return time.Duration(f * float64(time.Second)), true, nil
}

// ControlKind says what the scheduler decided about a task.
type ControlKind string

// The scheduler's decisions, sent on task:ID:control.
const (
	// ControlTimeout is a downgrade: the run's new limit, from its start.
	ControlTimeout ControlKind = "timeout"
	// ControlDenied refuses a task that never started (an interactive task
	// with no free backend).
	ControlDenied ControlKind = "denied"
	// ControlEnd ends a started task: halted, or its backend went away.
	ControlEnd ControlKind = "end"
)

// Control is one message on task:ID:control.
type Control struct {
	Kind    ControlKind
	Timeout time.Duration // ControlTimeout
	Text    string        // ControlDenied and ControlEnd: the client's text
}

// String encodes c: "timeout 3000", "denied TEXT" or "end TEXT".
func (c Control) String() string {
	if c.Kind == ControlTimeout {
		return string(c.Kind) + " " + strconv.FormatInt(c.Timeout.Milliseconds(), 10)
	}
	return string(c.Kind) + " " + c.Text
}

// ParseControl decodes a message of task:ID:control.
func ParseControl(s string) (Control, error) {
	kind, rest, _ := strings.Cut(s, " ")
	c := Control{Kind: ControlKind(kind)}
	switch c.Kind {
	case ControlTimeout:
		ms, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || ms <= 0 {
			return c, fmt.Errorf("control %q: bad timeout", s)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	case ControlDenied, ControlEnd:
		if rest == "" {
			return c, fmt.Errorf("control %q: no text", s)
		}
		c.Text = rest
	default:
		return c, fmt.Errorf("control %q: unknown kind", s)
	}
	return c, nil
}
