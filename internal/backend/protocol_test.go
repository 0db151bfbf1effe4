package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/usherhq/usher/internal/sandbox"
)

// Each format: result {format} with the format's bytes, then a successful
// complete with a time, then a normal close, in that order.
func TestFormats(t *testing.T) {
	tb := newTestBackend(t)
	tests := []struct {
		format string
		magic  []byte
	}{
		{sandbox.FormatSVG, []byte("<?xml")},
		{sandbox.FormatPDF, []byte("%PDF-")},
		{sandbox.FormatPNG, []byte("\x89PNG\r\n\x1a\n")},
		{sandbox.FormatHTML, []byte("<!DOCTYPE html")},
		{sandbox.FormatEPS, []byte("%!PS-Adobe")},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			msgs := tb.runFigure(t, tt.format)
			var results []message
			for _, m := range msgs[:len(msgs)-1] {
				switch m.verb {
				case VerbResult:
					results = append(results, m)
				case VerbOutput:
				default:
					t.Fatalf("unexpected %v before complete", m)
				}
			}
			if len(results) != 1 {
				t.Fatalf("%d results, want 1: %v", len(results), msgs)
			}
			var rb ResultBody
			if err := json.Unmarshal(results[0].body, &rb); err != nil || rb.Format != tt.format {
				t.Fatalf("result header %s, want format %q", results[0].body, tt.format)
			}
			if !bytes.HasPrefix(results[0].payload, tt.magic) {
				t.Fatalf("%s image starts %q, want %q", tt.format, results[0].payload[:min(8, len(results[0].payload))], tt.magic)
			}
		})
	}
}

// A 3D figure through the backend in every format that can hold one: the
// result is a file of that format (the sandbox's tests check what is in it).
func TestFormats3D(t *testing.T) {
	tb := newTestBackend(t)
	for _, format := range sandbox.Formats {
		t.Run(format, func(t *testing.T) {
			c := tb.dial(t)
			c.add("sphere.asy", true, "import three; size(2cm); draw(unitsphere, red);\n")
			c.send(VerbOptions, map[string]any{"format": format})
			c.send(VerbRun, nil)
			msgs, _ := c.transcript()
			if done := last(t, msgs); !done.Success {
				t.Fatalf("%+v after %v", done, msgs)
			}
			var rb ResultBody
			for _, m := range msgs {
				if m.verb == VerbResult && json.Unmarshal(m.body, &rb) == nil && rb.Format == format && sandbox.HasMagic(format, m.payload) {
					return
				}
			}
			t.Fatalf("no %s result in %v", format, msgs)
		})
	}
}

// Without options the task gets the protocol's defaults; options map onto the
// task as sent, and later options messages override earlier ones.
func TestOptionsReachTheTask(t *testing.T) {
	tests := []struct {
		name    string
		options []map[string]any
		want    sandbox.Task
	}{
		{name: "defaults", want: sandbox.Task{Format: "svg"}},
		{name: "all set", options: []map[string]any{{
			"interactive": false, "timeout": 1500, "format": "png", "stderr": "separate", "verbosity": 2,
		}}, want: sandbox.Task{Format: "png", Timeout: 1500 * time.Millisecond, SeparateStderr: true, Verbosity: 2}},
		{name: "merged", options: []map[string]any{{"format": "pdf", "verbosity": 3}, {"stderr": "stdout", "verbosity": 1}},
			want: sandbox.Task{Format: "pdf", Verbosity: 1}},
		{name: "empty object", options: []map[string]any{{}}, want: sandbox.Task{Format: "svg"}},
	}
	tb := newTestBackend(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tb.dial(t)
			c.add("fig.asy", true, figure)
			c.add("lib.asy", false, "int x;\n")
			for _, o := range tt.options {
				c.send(VerbOptions, o)
			}
			c.send(VerbRun, nil)
			task := tb.rec.start(t)
			if _, status := c.transcript(); status != websocket.StatusNormalClosure {
				t.Fatalf("closed with %v", status)
			}
			tb.rec.ended(t, 30*time.Second)
			want := tt.want
			want.Files = []sandbox.File{{Name: "fig.asy", Data: []byte(figure), Main: true}, {Name: "lib.asy", Data: []byte("int x;\n")}}
			if !sameTask(task, want) {
				t.Fatalf("task %+v, want %+v", task, want)
			}
		})
	}
}

func sameTask(a, b sandbox.Task) bool {
	if len(a.Files) != len(b.Files) {
		return false
	}
	for i := range a.Files {
		if a.Files[i].Name != b.Files[i].Name || a.Files[i].Main != b.Files[i].Main || !bytes.Equal(a.Files[i].Data, b.Files[i].Data) {
			return false
		}
	}
	return a.Format == b.Format && a.Timeout == b.Timeout && a.SeparateStderr == b.SeparateStderr &&
		a.Verbosity == b.Verbosity && a.Interactive == b.Interactive
}

// A bad input case: what the client sends, the exact error it gets, and
// whether a task had started by then.
type badCase struct {
	name    string
	send    func(c *client)
	err     string
	started bool
}

func text(s string) func(*client) {
	return func(c *client) { c.raw(websocket.MessageText, []byte(s)) }
}

// addRun adds a main file and says run; then more follows.
func addRun(src string, options map[string]any, more func(*client)) func(*client) {
	return func(c *client) {
		c.add("main.asy", true, src)
		if options != nil {
			c.send(VerbOptions, options)
		}
		c.send(VerbRun, nil)
		more(c)
	}
}

func badCases() []badCase {
	long := map[string]any{"timeout": 20000}
	interactive := map[string]any{"timeout": 20000, "interactive": true}
	cases := []badCase{
		{name: "unknown verb", send: text("launch"), err: `unknown message "launch"`},
		{name: "outgoing verb", send: text(`complete {"success":true}`), err: `unknown message "complete"`},
		{name: "uppercase verb", send: text("RUN"), err: `malformed header "RUN": a header starts with a lowercase verb`},
		{name: "empty message", send: text(""), err: "empty message where a header is due"},
		{name: "malformed JSON", send: text(`options {"timeout":}`), err: `malformed JSON after "options": invalid character '}' looking for beginning of value`},
		{name: "scalar body", send: text(`options 5`), err: `malformed JSON after "options": expected an object or an array`},
		{name: "array for object", send: text(`options [1]`), err: `"options" takes a JSON object`},
		{name: "unknown option", send: text(`options {"foo":1}`), err: `unknown option "foo"`},
		{name: "option in wrong case", send: text(`options {"Timeout":1}`), err: `unknown option "Timeout"`},
		{name: "duplicate option", send: text(`options {"timeout":1,"timeout":2}`), err: `duplicate option "timeout"`},
		{name: "timeout as string", send: text(`options {"timeout":"1000"}`), err: `option "timeout" must be an integer`},
		{name: "timeout fractional", send: text(`options {"timeout":1.5}`), err: `option "timeout" must be an integer`},
		{name: "interactive as string", send: text(`options {"interactive":"yes"}`), err: `option "interactive" must be a boolean`},
		{name: "format as number", send: text(`options {"format":1}`), err: `option "format" must be a string`},
		{name: "verbosity null", send: text(`options {"verbosity":null}`), err: `option "verbosity" must be an integer`},
		{name: "format gif", send: text(`options {"format":"gif"}`), err: ErrBadFormat},
		{name: "format in capitals", send: text(`options {"format":"SVG"}`), err: ErrBadFormat},
		{name: "stderr both", send: text(`options {"stderr":"both"}`), err: ErrBadStderr},
		{name: "verbosity 4", send: text(`options {"verbosity":4}`), err: ErrBadVerbosity},
		{name: "verbosity -1", send: text(`options {"verbosity":-1}`), err: ErrBadVerbosity},
		{name: "timeout 0", send: text(`options {"timeout":0}`), err: ErrBadTimeout},
		{name: "timeout negative", send: text(`options {"timeout":-5}`), err: ErrBadTimeout},
		{name: "unknown add field", send: text(`add {"filename":"a.asy","hash":"00"}`), err: `unknown add field "hash"`},
		{name: "main as number", send: text(`add {"filename":"a.asy","main":1}`), err: `add field "main" must be a boolean`},
		{name: "add without filename", send: text(`add {"main":true}`), err: ErrNoFilename},
		{name: "missing payload", send: func(c *client) {
			c.send(VerbAdd, map[string]any{"filename": "a.asy", "main": true})
			c.send(VerbRun, nil)
		},
			err: `missing payload of "add": a binary message must follow it`},
		{name: "binary where a header is due", send: func(c *client) { c.raw(websocket.MessageBinary, []byte(figure)) },
			err: "binary message where a header is due"},
		{name: "header too large", send: text(`options {"format":"` + strings.Repeat("x", 17<<10) + `"}`),
			err: "header too large: the limit is 16384 bytes"},
		{name: "duplicate file", send: func(c *client) { c.add("a.asy", true, figure); c.add("a.asy", false, figure) },
			err: `file "a.asy" added twice`},
		{name: "too many files", send: func(c *client) {
			for _, n := range []string{"a.asy", "b.asy", "c.asy", "d.asy", "e.asy"} {
				c.add(n, n == "a.asy", "\n")
			}
		}, err: "too many files: the limit is 4"},
		{name: "one file over the upload cap", send: func(c *client) { c.add("a.asy", true, strings.Repeat("/", testMaxUpload+1)) },
			err: "upload too large: the limit is 65536 bytes"},
		{name: "files together over the upload cap", send: func(c *client) {
			c.add("a.asy", true, strings.Repeat("/", 40<<10))
			c.add("b.asy", false, strings.Repeat("/", 30<<10))
		}, err: "upload too large: the limit is 65536 bytes"},
		{name: "run without files", send: func(c *client) { c.send(VerbRun, nil) }, err: ErrNoMain},
		{name: "run without a main file", send: func(c *client) { c.add("a.asy", false, figure); c.send(VerbRun, nil) }, err: ErrNoMain},
		{name: "main file not .asy", send: func(c *client) { c.add("a.csv", true, "1,2\n"); c.send(VerbRun, nil) },
			err: `the main file must be Asymptote source ending in ".asy": "a.csv"`},
		{name: "png that is text", send: func(c *client) { c.add("photo.png", false, figure) },
			err: `file "photo.png" is not a PNG image: its content does not start with that format's signature`},
		{name: "csv that is not UTF-8", send: func(c *client) { c.add("d.csv", false, "1,\xff\n") },
			err: `file "d.csv" is not text: it is not valid UTF-8`},
		{name: "run with two main files", send: func(c *client) { c.add("a.asy", true, figure); c.add("b.asy", true, figure); c.send(VerbRun, nil) },
			err: `two main files: "a.asy" and "b.asy"`},
		{name: "run with a body", send: func(c *client) {
			c.add("a.asy", true, figure)
			c.raw(websocket.MessageText, []byte(`run {"now":true}`))
		},
			err: `unknown run field "now"`},
		{name: "input without interactive, before run", send: func(c *client) { c.sendPayload(VerbInput, nil, []byte("1;\n")) },
			err: ErrInputNotInteractive},
		{name: "input before run", send: func(c *client) {
			c.send(VerbOptions, map[string]any{"interactive": true})
			c.sendPayload(VerbInput, nil, []byte("1;\n"))
		}, err: ErrInputBefore},
		{name: "second run", send: addRun(spin, long, func(c *client) { c.send(VerbRun, nil) }), err: ErrRunTwice, started: true},
		{name: "add after run", send: addRun(spin, long, func(c *client) { c.add("b.asy", false, "\n") }), err: ErrAddAfterRun, started: true},
		{name: "format after run", send: addRun(spin, long, func(c *client) { c.send(VerbOptions, map[string]any{"format": "png"}) }),
			err: `option "format" cannot change after run`, started: true},
		{name: "interactive after run", send: addRun(spin, long, func(c *client) { c.send(VerbOptions, map[string]any{"interactive": true, "timeout": 5}) }),
			err: `option "interactive" cannot change after run`, started: true},
		{name: "timeout 0 after run", send: addRun(spin, long, func(c *client) { c.send(VerbOptions, map[string]any{"timeout": 0}) }),
			err: ErrBadTimeout, started: true},
		{name: "input without interactive", send: addRun(spin, long, func(c *client) { c.sendPayload(VerbInput, nil, []byte("write(1);\n")) }),
			err: ErrInputNotInteractive, started: true},
		{name: "input too large", send: addRun("\n", interactive, func(c *client) {
			c.sendPayload(VerbInput, nil, bytes.Repeat([]byte("\n"), testMaxInput+1))
		}), err: "input too large: the limit is 1024 bytes", started: true},
		{name: "input with a text payload", send: addRun("\n", interactive, func(c *client) { c.send(VerbInput, nil); c.send(VerbRun, nil) }),
			err: `missing payload of "input": a binary message must follow it`, started: true},
	}
	for _, name := range []string{"a.sh", "a.PNG", "out.png", "../x.csv", "a", "dir/a.asy", `dir\a.asy`, "../a.asy", "a..asy", "a\x00.asy", "a\n.asy", "a\x7f.asy",
		strings.Repeat("x", 252) + ".asy"} {
		cases = append(cases, badCase{name: "file name " + name[:min(len(name), 12)], send: func(c *client) { c.add(name, true, figure) },
			err: sandbox.CheckFileName(name).Error()})
	}
	return cases
}

// Every bad input: exactly complete {success:false, error:<text>} (after
// whatever a started task sent), a close, no task started unless the case
// says so, a started task gone, and the next connection works normally.
func TestBadInput(t *testing.T) {
	tb := newTestBackend(t)
	for _, tt := range badCases() {
		t.Run(tt.name, func(t *testing.T) {
			before := tb.rec.started()
			c := tb.dial(t)
			tt.send(c)
			msgs, status := c.transcript()
			done := last(t, msgs)
			if done.Success || done.Error != tt.err {
				t.Fatalf("complete %+v, want error %q", done, tt.err)
			}
			if status != websocket.StatusPolicyViolation {
				t.Fatalf("closed with %v, want policy violation", status)
			}
			if got := tb.rec.started() - before; got != b2i(tt.started) {
				t.Fatalf("%d tasks started, want %d", got, b2i(tt.started))
			}
			if tt.started {
				if out := tb.rec.ended(t, 10*time.Second); out.Success {
					t.Fatalf("aborted task reported success: %+v", out)
				}
			} else if n := len(msgs); n != 1 {
				t.Fatalf("%d messages before the close, want only complete: %v", n, msgs)
			}
			tb.runFigure(t, sandbox.FormatPDF)
			tb.rec.ended(t, 10*time.Second)
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A second connection while one is open is refused with "backend busy"
// and a try-again-later close; the first goes on and completes normally.
func TestSecondConnectionRefused(t *testing.T) {
	tb := newTestBackend(t)
	first := tb.dial(t)
	first.add("fig.asy", true, figure)
	first.send(VerbOptions, map[string]any{"format": "pdf"})
	second := tb.dial(t)
	msgs, status := second.transcript()
	if done := last(t, msgs); len(msgs) != 1 || done.Success || done.Error != ErrBusy || done.Time != nil {
		t.Fatalf("second connection got %v, want only complete %q", msgs, ErrBusy)
	}
	if status != websocket.StatusTryAgainLater {
		t.Fatalf("second connection closed with %v, want try again later", status)
	}
	first.send(VerbRun, nil)
	msgs, status = first.transcript()
	if done := last(t, msgs); !done.Success || countVerb(msgs, VerbResult) != 1 || status != websocket.StatusNormalClosure {
		t.Fatalf("first connection: %v closed with %v", msgs, status)
	}
}

// Closing the connection mid-run aborts the task long before its time
// limit, and the next connection works.
func TestCloseMidRunAborts(t *testing.T) {
	tests := []struct {
		name  string
		close func(c *client)
	}{
		{"close handshake", func(c *client) { _ = c.ws.Close(websocket.StatusNormalClosure, "") }},
		{"dropped connection", func(c *client) { _ = c.ws.CloseNow() }},
	}
	tb := newTestBackend(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tb.dial(t)
			c.add("spin.asy", true, spin)
			c.send(VerbOptions, map[string]any{"timeout": 20000})
			c.send(VerbRun, nil)
			tb.rec.start(t)
			began := time.Now()
			tt.close(c)
			out := tb.rec.ended(t, 10*time.Second)
			if out.Success || time.Since(began) > 10*time.Second {
				t.Fatalf("task ended %+v after %v", out, time.Since(began))
			}
			tb.runFigure(t, sandbox.FormatPDF)
			tb.rec.ended(t, 10*time.Second)
		})
	}
}

// options {timeout} after run shortens the limit, counted from the start;
// a later limit than the current one is ignored.
func TestTimeoutAfterRun(t *testing.T) {
	tests := []struct {
		name           string
		initial, later int
		want           string
	}{
		{"shortens", 20000, 400, "Execution aborted due to the time limit (400ms)"},
		{"never lengthens", 400, 20000, "Execution aborted due to the time limit (400ms)"},
	}
	tb := newTestBackend(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tb.dial(t)
			c.add("spin.asy", true, spin)
			c.send(VerbOptions, map[string]any{"timeout": tt.initial})
			c.send(VerbRun, nil)
			c.send(VerbOptions, map[string]any{"timeout": tt.later})
			msgs, status := c.transcript()
			done := last(t, msgs)
			if done.Success || done.Error != tt.want || done.Time == nil || *done.Time < 300 || *done.Time > 10000 {
				t.Fatalf("complete %+v, want %q after about 400ms", done, tt.want)
			}
			if status != websocket.StatusNormalClosure {
				t.Fatalf("closed with %v", status)
			}
			tb.rec.ended(t, 10*time.Second)
		})
	}
}

// answer3 is asy's answer to write(1+2): a line "3", maybe after a prompt
// (not a digit of the welcome banner's version number).
var answer3 = regexp.MustCompile(`(^|\n)(> )*3\r?\n`)

// Interactive: input "write(1+2);" comes back as output with the line 3.
func TestInteractive(t *testing.T) {
	tb := newTestBackend(t)
	c := tb.dial(t)
	c.add("main.asy", true, "size(1cm);\n")
	c.send(VerbOptions, map[string]any{"interactive": true, "timeout": 20000})
	c.send(VerbRun, nil)
	c.sendPayload(VerbInput, nil, []byte("write(1+2);\n"))
	awaitAnswer3(t, c)
	_ = c.ws.Close(websocket.StatusNormalClosure, "")
	tb.rec.ended(t, 10*time.Second)
}

// awaitAnswer3 reads c until the shell's output holds the answer to
// write(1+2), failing when the task completes first.
func awaitAnswer3(t *testing.T, c *client) {
	t.Helper()
	var seen strings.Builder
	c.until(func(m message) bool {
		if m.verb == VerbComplete {
			t.Fatalf("complete before the answer: %s (output %q)", m.body, seen.String())
		}
		seen.Write(m.payload)
		return answer3.MatchString(seen.String())
	})
}

// A bare shell: an interactive task with no file at all runs, answers its
// input, and its timeout option bounds it.
func TestInteractiveBareShell(t *testing.T) {
	tb := newTestBackend(t)
	c := tb.dial(t)
	c.send(VerbOptions, map[string]any{"interactive": true, "timeout": 4000})
	c.send(VerbRun, nil)
	c.sendPayload(VerbInput, nil, []byte("write(1+2);\n"))
	awaitAnswer3(t, c)
	c.sendPayload(VerbInput, nil, []byte("while(true) {}\n"))
	msgs, _ := c.transcript()
	if done := last(t, msgs); done.Success || done.Error != "Execution aborted due to the time limit (4000ms)" {
		t.Fatalf("complete %+v, want the time limit of the timeout option", done)
	}
	if task := tb.rec.start(t); len(task.Files) != 0 || !task.Interactive {
		t.Fatalf("task %+v, want an interactive task without files", task)
	}
	tb.rec.ended(t, 10*time.Second)
}

// A client that never says run is refused after SetupTimeout.
func TestSetupTimeout(t *testing.T) {
	tb := newTestBackend(t, func(c *Config) { c.SetupTimeout = 300 * time.Millisecond })
	c := tb.dial(t)
	c.add("fig.asy", true, figure)
	msgs, status := c.transcript()
	if done := last(t, msgs); len(msgs) != 1 || done.Error != "no run within 300ms" || status != websocket.StatusPolicyViolation {
		t.Fatalf("got %v closed with %v", msgs, status)
	}
	if tb.rec.started() != 0 {
		t.Fatal("a task started")
	}
	tb.runFigure(t, sandbox.FormatPDF)
}

// Shutdown lets a running task finish while its context lasts, aborts it
// with "backend shutting down" when it ends, and refuses new connections.
func TestShutdown(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		grace time.Duration
		check func(t *testing.T, done CompleteBody, status websocket.StatusCode)
	}{
		{"drains a short task", figure, 30 * time.Second, func(t *testing.T, done CompleteBody, status websocket.StatusCode) {
			if !done.Success || status != websocket.StatusNormalClosure {
				t.Fatalf("complete %+v closed with %v, want success", done, status)
			}
		}},
		{"aborts a long one", spin, 300 * time.Millisecond, func(t *testing.T, done CompleteBody, status websocket.StatusCode) {
			if done.Success || done.Error != ErrShuttingDown || status != websocket.StatusGoingAway {
				t.Fatalf("complete %+v closed with %v, want %q", done, status, ErrShuttingDown)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newTestBackend(t)
			c := tb.dial(t)
			c.add("main.asy", true, tt.src)
			c.send(VerbOptions, map[string]any{"format": "pdf", "timeout": 20000})
			c.send(VerbRun, nil)
			tb.rec.start(t)
			ctx, cancel := testContext(tt.grace)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- tb.Shutdown(ctx) }()
			msgs, status := c.transcript()
			tt.check(t, last(t, msgs), status)
			<-shut
			late := tb.dial(t)
			msgs, status = late.transcript()
			if done := last(t, msgs); done.Error != ErrShuttingDown || status != websocket.StatusGoingAway {
				t.Fatalf("connection after shutdown got %v closed with %v", msgs, status)
			}
		})
	}
}

// A plain HTTP request gets 426 Upgrade Required, not a hang.
func TestPlainHTTP(t *testing.T) {
	tb := newTestBackend(t)
	resp, err := http.Get("http" + strings.TrimPrefix(tb.url, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("status %d, want 426", resp.StatusCode)
	}
}

// failingStarter is a FAKE runner for faults the real one cannot produce on
// demand: Start panics (a bug) or fails with err.
type failingStarter struct {
	panics bool
	err    error
}

func (f failingStarter) Start(context.Context, sandbox.Task, sandbox.Sink) (Execution, error) {
	if f.panics {
		panic("boom")
	}
	return nil, f.err
}

// A runner that refuses the task, fails or panics: the client gets a
// specific error, and the backend is free for the next connection.
func TestStartFailures(t *testing.T) {
	tests := []struct {
		name    string
		starter failingStarter
		err     string
		code    websocket.StatusCode
	}{
		{"invalid task", failingStarter{err: fmt.Errorf("%w: format \"svg\" needs dvisvgm", sandbox.ErrInvalidTask)},
			`invalid task: format "svg" needs dvisvgm`, websocket.StatusPolicyViolation},
		{"start fails", failingStarter{err: errors.New("bwrap: cannot mount /proc")}, ErrStartFailed, websocket.StatusInternalError},
		{"start panics", failingStarter{panics: true}, ErrInternal, websocket.StatusInternalError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{Starter: tt.starter, tasks: make(chan sandbox.Task, 1), waited: make(chan sandbox.Outcome, 1)}
			tb := newTestBackendWith(t, rec)
			for range 2 { // the second connection finds the backend free
				c := tb.dial(t)
				c.add("fig.asy", true, figure)
				c.send(VerbRun, nil)
				msgs, status := c.transcript()
				if done := last(t, msgs); len(msgs) != 1 || done.Error != tt.err || status != tt.code {
					t.Fatalf("got %v closed with %v, want %q and %v", msgs, status, tt.err, tt.code)
				}
			}
		})
	}
}
