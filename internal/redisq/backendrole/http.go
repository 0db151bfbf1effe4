package backendrole

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/wire"
)

// Handler serves the task URLs (/task/TOKEN: a WebSocket for the queue
// server that holds the task's client, one connection per task) and the
// probes: GET /livez answers 200 while the process runs, GET /readyz 200
// while the backend is registered, its heartbeat works and it runs no
// task, 503 otherwise. Any other path or token is 404.
func (r *Role) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/task/{token}", r.serveTask)
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", r.readyz)
	return mux
}

func (r *Role) readyz(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	busy, beatErr, stopping := r.cur != nil, r.beatErr, r.stopping
	r.mu.Unlock()
	switch {
	case stopping:
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
	case beatErr != nil:
		http.Error(w, beatErr.Error(), http.StatusServiceUnavailable)
	case busy:
		http.Error(w, "busy", http.StatusServiceUnavailable)
	default:
		fmt.Fprintln(w, "idle")
	}
}

// tokenOf returns the running job if token is its token.
func (r *Role) tokenOf(token string) *job {
	j := r.current()
	if j == nil || subtle.ConstantTimeCompare([]byte(j.token), []byte(token)) != 1 {
		return nil
	}
	return j
}

// claim returns the running job whose token is token if it still waits
// for its connection, and marks it claimed: any later request is 404.
func (r *Role) claim(token string) *job {
	j := r.tokenOf(token)
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state != waiting {
		return nil
	}
	j.state = claimed
	return j
}

// serveTask accepts the queue server's connection to a task and serves it.
func (r *Role) serveTask(w http.ResponseWriter, req *http.Request) {
	opts := &websocket.AcceptOptions{OriginPatterns: r.cfg.OriginPatterns}
	if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
		if r.tokenOf(req.PathValue("token")) == nil {
			http.NotFound(w, req)
			return
		}
		_, _ = websocket.Accept(w, req, opts) // writes the HTTP error
		return
	}
	j := r.claim(req.PathValue("token"))
	if j == nil {
		http.NotFound(w, req)
		return
	}
	ws, err := websocket.Accept(w, req, opts)
	if err != nil {
		j.log.Info("backend: handshake failed", "remote", req.RemoteAddr, "err", err)
		j.abort(peerGone)
		return
	}
	conn := wire.NewConn(ws, 0, backend.VerbOptions, backend.VerbInput)
	if !j.attach(conn) {
		_ = ws.Close(websocket.StatusGoingAway, "task over")
		return
	}
	j.log.Info("backend: queue server connected", "remote", req.RemoteAddr)
	j.readLoop(conn)
}

// attach makes conn the job's connection and sends the output held so
// far; false if the job no longer waits for one.
func (j *job) attach(conn *wire.Conn) bool {
	j.sendMu.Lock()
	defer j.sendMu.Unlock()
	j.mu.Lock()
	if j.state != claimed {
		j.mu.Unlock()
		return false
	}
	j.state, j.conn = connected, conn
	close(j.connected)
	j.mu.Unlock()
	held := j.pending
	j.pending = nil
	for _, m := range held {
		if err := j.sendNow(conn, m); err != nil {
			j.abort(peerGone)
			break
		}
	}
	return true
}

// readLoop handles the queue server's messages once the run started,
// until the connection ends.
func (j *job) readLoop(conn *wire.Conn) {
	defer close(j.served)
	<-j.started
	for {
		h, err := conn.ReadHeader(context.Background())
		if err == nil {
			err = j.handle(conn, h)
		}
		if err != nil {
			j.readFailed(err)
			return
		}
	}
}

// readFailed aborts the job for a read or a message that was wrong,
// unless the connection is closing after complete.
func (j *job) readFailed(err error) {
	j.mu.Lock()
	closing := j.closing
	j.mu.Unlock()
	if closing {
		return
	}
	var e *ending
	var tooLarge *wire.TooLargeError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &tooLarge):
		e = refusal("header too large: the limit is %d bytes", tooLarge.Limit)
	case wire.IsProtocol(err):
		e = refusal("%s", err.Error())
	default:
		e = peerGone
	}
	j.log.Info("backend: task aborted by its connection", "reason", e.text)
	j.abort(e)
}

func (e *ending) Error() string { return e.text }

// refusal is an ending for a queue server's mistake.
func refusal(format string, args ...any) *ending {
	return &ending{text: fmt.Sprintf(format, args...), code: websocket.StatusPolicyViolation}
}

// handle acts on one message: options {timeout} or input.
func (j *job) handle(conn *wire.Conn, h wire.Header) error {
	j.mu.Lock()
	exec, interactive := j.exec, j.interactive
	j.mu.Unlock()
	if h.Verb == backend.VerbOptions {
		return shorten(exec, h)
	}
	if err := wire.Decode(h, &struct{}{}, "input field"); err != nil {
		return err
	}
	if !interactive {
		return refusal(backend.ErrInputNotInteractive)
	}
	data, err := conn.ReadPayload(context.Background(), h, "input", j.r.cfg.MaxInput)
	var tooLarge *wire.TooLargeError
	if errors.As(err, &tooLarge) {
		return refusal("input too large: the limit is %d bytes", j.r.cfg.MaxInput)
	}
	if err != nil {
		return err
	}
	if exec != nil {
		if err := exec.Input(data); err != nil {
			j.log.Debug("backend: input after the task ended", "err", err)
		}
	}
	return nil
}

// shorten applies options {timeout}, the one option the task's run
// takes: the time limit only ever goes down (Execution.Shorten).
func shorten(exec backend.Execution, h wire.Header) error {
	var body backend.OptionsBody
	if err := wire.Decode(h, &body, "option"); err != nil {
		return err
	}
	others := []struct {
		name string
		set  bool
	}{
		{"interactive", body.Interactive != nil}, {"format", body.Format != nil},
		{"stderr", body.Stderr != nil}, {"verbosity", body.Verbosity != nil},
	}
	for _, o := range others {
		if o.set {
			return refusal("option %q cannot change after run", o.name)
		}
	}
	if body.Timeout == nil {
		return nil
	}
	if *body.Timeout <= 0 {
		return refusal(backend.ErrBadTimeout)
	}
	if exec != nil {
		exec.Shorten(msDuration(*body.Timeout))
	}
	return nil
}

// msDuration converts positive milliseconds, saturating far-off ones.
func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
