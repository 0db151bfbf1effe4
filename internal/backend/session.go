package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// errEnded stops the reader of a session something else is ending.
var errEnded = errors.New("session ended")

// gone marks a session whose client left: nothing more is sent.
var gone = &refusal{text: "client gone"}

// session is one connection holding the backend's slot: it collects files
// and options, runs one task, and ends with complete and a close.
//
// The handler goroutine reads and handles messages. The session ends
// once: end records the first reason, then either cancels the running task
// (its waiter calls finish when Wait returns) or calls finish at once.
type session struct {
	b   *Backend
	log *slog.Logger

	// Owned by the handler goroutine.
	files  []sandbox.File
	names  map[string]bool
	upload int64
	opts   sandbox.Task // the options so far; files are kept apart
	setup  *time.Timer

	mu        sync.Mutex
	conn      *wire.Conn // nil until the handshake is done
	reason    *refusal   // why the session ends; first one wins
	exec      Execution  // nil until run
	cancelRun context.CancelFunc
	started   time.Time

	ending     chan struct{} // closed when reason is set
	released   chan struct{} // closed when the slot is free
	done       chan struct{} // closed when finish has run
	finishOnce sync.Once
}

func newSession(b *Backend, log *slog.Logger) *session {
	return &session{
		b: b, log: log, names: map[string]bool{}, opts: defaultOptions(),
		ending: make(chan struct{}), released: make(chan struct{}), done: make(chan struct{}),
	}
}

// serve runs the session on an accepted connection and returns when it is
// over: the task ended, its files are gone, the connection is closed.
func (s *session) serve(ws *websocket.Conn) {
	conn := wire.NewConn(ws, s.b.cfg.MaxHeader, Incoming...)
	s.mu.Lock()
	s.conn = conn
	ended := s.reason != nil
	s.mu.Unlock()
	if ended { // shut down during the handshake
		s.finish(nil)
		return
	}
	s.setup = time.AfterFunc(s.b.cfg.SetupTimeout, func() { s.end(errNoRun(s.b.cfg.SetupTimeout)) })
	defer s.setup.Stop()
	defer s.recoverPanic()
	s.readLoop()
	<-s.done
}

// recoverPanic turns a panic while handling a message into an internal
// error for the client, so that the slot is freed and the task aborted.
func (s *session) recoverPanic() {
	if p := recover(); p != nil {
		s.log.Error("backend: panic", "panic", p, "stack", string(debug.Stack()))
		s.end(&refusal{text: ErrInternal, code: websocket.StatusInternalError})
		<-s.done
	}
}

// readLoop handles messages until the session ends.
func (s *session) readLoop() {
	for {
		h, err := s.conn.ReadHeader(s.b.base)
		if err == nil {
			err = s.handle(h)
		}
		if err != nil {
			s.fail(err)
			return
		}
	}
}

// fail ends the session for a reading or handling error.
func (s *session) fail(err error) {
	var r *refusal
	var tooLarge *wire.TooLargeError
	switch {
	case errors.Is(err, errEnded):
		return
	case errors.As(err, &r):
	case errors.As(err, &tooLarge):
		r = errHeaderTooLarge(tooLarge.Limit)
	case wire.IsProtocol(err):
		r = refuse("%s", err.Error())
	default:
		r = gone
	}
	s.end(r)
}

// handle acts on one message.
func (s *session) handle(h wire.Header) error {
	switch h.Verb {
	case VerbAdd:
		return s.add(h)
	case VerbOptions:
		return s.options(h)
	case VerbRun:
		return s.run(h)
	default:
		return s.input(h)
	}
}

func (s *session) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exec != nil
}

// add reads one file: its header is checked before its payload is read,
// and the payload is read only up to what is left of the upload cap.
func (s *session) add(h wire.Header) error {
	var body addBody
	if err := wire.Decode(h, &body, "add field"); err != nil {
		return err
	}
	if s.running() {
		return refuse(ErrAddAfterRun)
	}
	if body.Filename == nil {
		return refuse(ErrNoFilename)
	}
	name := *body.Filename
	if err := sandbox.CheckFileName(name); err != nil {
		return refuse("%s", err.Error())
	}
	if s.names[name] {
		return errDuplicateFile(name)
	}
	if len(s.files) >= s.b.cfg.MaxFiles {
		return errTooManyFiles(s.b.cfg.MaxFiles)
	}
	data, err := s.conn.ReadPayload(s.b.base, h, "file", s.b.cfg.MaxUpload-s.upload)
	var tooLarge *wire.TooLargeError
	if errors.As(err, &tooLarge) {
		return errUploadTooLarge(s.b.cfg.MaxUpload)
	}
	if err != nil {
		return err
	}
	if err := sandbox.CheckFileContent(name, data); err != nil {
		return refuse("%s", err.Error())
	}
	s.upload += int64(len(data))
	s.names[name] = true
	s.files = append(s.files, sandbox.File{Name: name, Data: data, Main: body.Main != nil && *body.Main})
	return nil
}

// options merges options before run and shortens the timeout after it.
func (s *session) options(h wire.Header) error {
	var body OptionsBody
	if err := wire.Decode(h, &body, "option"); err != nil {
		return err
	}
	if !s.running() {
		return applyOptions(&s.opts, body)
	}
	d, err := timeoutAfterRun(body)
	if err != nil || d == 0 {
		return err
	}
	s.exec.Shorten(d)
	return nil
}

// input feeds an interactive task.
func (s *session) input(h wire.Header) error {
	if err := wire.Decode(h, &emptyBody{}, "input field"); err != nil {
		return err
	}
	if !s.opts.Interactive {
		return refuse(ErrInputNotInteractive)
	}
	if !s.running() {
		return refuse(ErrInputBefore)
	}
	data, err := s.conn.ReadPayload(s.b.base, h, "input", s.b.cfg.MaxInput)
	var tooLarge *wire.TooLargeError
	if errors.As(err, &tooLarge) {
		return errInputTooLarge(s.b.cfg.MaxInput)
	}
	if err != nil {
		return err
	}
	if err := s.exec.Input(data); err != nil {
		s.log.Debug("backend: input after the task ended", "err", err)
	}
	return nil
}

// run starts the task.
func (s *session) run(h wire.Header) error {
	if err := wire.Decode(h, &emptyBody{}, "run field"); err != nil {
		return err
	}
	if s.running() {
		return refuse(ErrRunTwice)
	}
	if err := s.checkMain(); err != nil {
		return err
	}
	return s.start(s.task())
}

// checkMain requires exactly one main file, Asymptote source; an
// interactive task (a shell) needs none.
func (s *session) checkMain() error {
	main := ""
	for _, f := range s.files {
		if !f.Main {
			continue
		}
		if main != "" {
			return errTwoMains(main, f.Name)
		}
		main = f.Name
	}
	switch {
	case main == "" && !s.opts.Interactive:
		return refuse(ErrNoMain)
	case main != "" && !s.opts.Interactive:
		if err := sandbox.CheckMainName(main); err != nil {
			return refuse("%s", err.Error())
		}
	}
	return nil
}

func (s *session) task() sandbox.Task {
	t := s.opts
	t.Files = s.files
	return t
}

// start starts t unless the session is already ending.
func (s *session) start(t sandbox.Task) error {
	s.setup.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != nil {
		return errEnded
	}
	ctx, cancel := context.WithCancel(s.b.base)
	exec, err := s.b.cfg.Starter.Start(ctx, t, s)
	if err != nil {
		cancel()
		if errors.Is(err, sandbox.ErrInvalidTask) {
			return refuse("%s", err.Error())
		}
		s.log.Error("backend: task did not start", "err", err)
		return &refusal{text: ErrStartFailed, code: websocket.StatusInternalError}
	}
	s.exec, s.cancelRun, s.started = exec, cancel, time.Now()
	s.files = nil // the runner has them now
	s.log.Info("backend: task started", "files", len(t.Files), "bytes", s.upload, "format", t.Format,
		"interactive", t.Interactive, "timeout", t.Timeout)
	go s.wait(exec)
	return nil
}

// wait finishes the session once the task is over.
func (s *session) wait(exec Execution) {
	out := exec.Wait()
	s.mu.Lock()
	s.cancelRun()
	s.mu.Unlock()
	s.finish(&out)
}

// end records why the session ends, if it is the first reason, and makes
// it end: a running task is aborted (its waiter finishes), else finish
// runs now. Safe from any goroutine.
func (s *session) end(r *refusal) {
	s.mu.Lock()
	if s.reason == nil {
		s.reason = r
		close(s.ending)
	}
	running, attached, cancel := s.exec != nil, s.conn != nil, s.cancelRun
	s.mu.Unlock()
	switch {
	case running:
		cancel()
	case attached:
		s.finish(nil)
	}
}

// finish sends complete (the first reason if there is one, else the
// outcome), frees the slot and closes the connection. It runs once.
func (s *session) finish(out *sandbox.Outcome) {
	s.finishOnce.Do(func() {
		s.mu.Lock()
		conn, r := s.conn, s.reason
		s.mu.Unlock()
		code, reason := s.reply(conn, r, out)
		s.b.release(s)
		if conn != nil {
			if code == 0 {
				_ = conn.WebSocket().CloseNow()
			} else {
				_ = conn.WebSocket().Close(code, reason)
			}
		}
		close(s.done)
	})
}

// reply sends the session's complete message and returns the close code
// and reason to use; code 0 means the client is gone.
func (s *session) reply(conn *wire.Conn, r *refusal, out *sandbox.Outcome) (websocket.StatusCode, string) {
	if conn == nil || r == gone {
		if out != nil {
			s.log.Info("backend: task aborted: client gone", "time", out.Time)
		}
		return 0, ""
	}
	body := CompleteBody{}
	code, reason := websocket.StatusNormalClosure, ""
	if r != nil {
		body.Error, code, reason = r.text, r.code, closeReason(r.text)
		s.log.Info("backend: refused", "reason", r.text)
	} else {
		body.Success, body.Error = out.Success, out.Error
		s.log.Info("backend: task ended", "success", out.Success, "error", out.Error, "time", out.Time)
	}
	if out != nil {
		ms := out.Time.Milliseconds()
		body.Time = &ms
	}
	ctx, cancel := context.WithTimeout(s.b.base, s.b.cfg.WriteTimeout)
	defer cancel()
	if err := conn.Send(ctx, VerbComplete, body); err != nil {
		s.log.Info("backend: complete not sent", "err", err)
	}
	return code, reason
}

// Output implements sandbox.Sink: one output message.
func (s *session) Output(stream string, data []byte) error {
	return s.send(VerbOutput, OutputBody{Stream: stream}, data)
}

// Result implements sandbox.Sink: one result message.
func (s *session) Result(format string, image []byte) error {
	return s.send(VerbResult, ResultBody{Format: format}, image)
}

func (s *session) send(verb string, body any, payload []byte) error {
	ctx, cancel := context.WithTimeout(s.b.base, s.b.cfg.WriteTimeout)
	defer cancel()
	if err := s.conn.SendPayload(ctx, verb, body, payload); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	return nil
}
