package backendrole

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// ending is why a job ends before its run's own outcome: the error its
// complete carries and the close code. A silent ending sends nothing (the
// queue server is gone).
type ending struct {
	text   string
	code   websocket.StatusCode
	silent bool
}

var (
	internalError = &ending{text: backend.ErrInternal, code: websocket.StatusInternalError}
	// redisDown ends a task whose files Redis did not give: the client
	// hears the cause, as from a queue server (docs/redis.md, "Faults").
	redisDown    = &ending{text: asyqueue.RedisDownText, code: websocket.StatusInternalError}
	shuttingDown = &ending{text: backend.ErrShuttingDown, code: websocket.StatusGoingAway}
	peerGone     = &ending{text: "queue server gone", silent: true}
)

// Connection states of a job.
const (
	waiting   = iota // the URL is out, nobody connected yet
	claimed          // one request got past the token; its handshake is under way
	connected        // the queue server connected (only one may)
	expired          // nobody connected in time, or the job was aborted first
)

// job is one task a backend took: its run, the output held until the
// queue server connects, and that connection.
type job struct {
	r     *Role
	task  string // task ID
	token string
	url   string
	log   *slog.Logger

	sendMu  sync.Mutex // orders every message sent
	pending []heldMessage

	mu          sync.Mutex
	state       int
	conn        *wire.Conn
	why         *ending // first reason to end early; nil: the outcome speaks
	exec        backend.Execution
	cancel      context.CancelFunc
	interactive bool
	outcome     *sandbox.Outcome
	closing     bool // complete is being sent: read errors are expected

	connected chan struct{} // closed on connection
	expired   chan struct{} // closed when no connection can come any more
	started   chan struct{} // closed once the run started or failed to
	ended     chan struct{} // closed once nothing of the run is left
	served    chan struct{} // closed when the connection's reader returned
	done      chan struct{} // closed when the job is over
}

// heldMessage is output or a result waiting for the connection.
type heldMessage struct {
	verb    string
	body    any
	payload []byte
}

func newJob(r *Role, taskID string) (*job, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("backendrole: task token: %w", err)
	}
	token := hex.EncodeToString(b[:])
	return &job{
		r: r, task: taskID, token: token, url: "ws://" + r.cfg.Advertise + "/task/" + token,
		log:       r.log.With("task", taskID),
		connected: make(chan struct{}), expired: make(chan struct{}), started: make(chan struct{}),
		ended: make(chan struct{}), served: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// runJob loads the files, starts the run and returns when the job is over,
// draining and then aborting it once ctx ends.
func (r *Role) runJob(ctx context.Context, j *job, hash map[string]string) {
	accept := time.AfterFunc(r.cfg.AcceptTimeout, func() {
		j.expire(&ending{text: fmt.Sprintf("no connection within %dms", r.cfg.AcceptTimeout.Milliseconds())})
	})
	defer accept.Stop()
	go j.lifecycle()
	files, err := r.loadFiles(context.WithoutCancel(ctx), j.task)
	if err != nil {
		r.log.Warn("backend: task files", "task", j.task, "err", err)
		j.fail(redisDown)
	} else {
		j.start(hash, files)
	}
	r.await(ctx, j)
}

// await waits for j to be over; once ctx ends it waits Drain more, then
// aborts j.
func (r *Role) await(ctx context.Context, j *job) {
	select {
	case <-j.done:
		return
	case <-ctx.Done():
	}
	j.log.Info("backend: shutting down: the running task may finish", "drain", r.cfg.Drain)
	t := time.NewTimer(r.cfg.Drain)
	defer t.Stop()
	select {
	case <-j.done:
	case <-t.C:
		j.log.Warn("backend: task aborted at shutdown")
		j.abort(shuttingDown)
		<-j.done
	}
}

// start starts the run from the task hash and files, or ends the job
// with a clear error when they are unusable.
func (j *job) start(hash map[string]string, files map[string]string) {
	opts, err := redisq.ParseOptions(hash)
	if err != nil {
		j.log.Error("backend: malformed task hash", "err", err)
		j.fail(&ending{text: "internal error: " + err.Error(), code: websocket.StatusInternalError})
		return
	}
	task := opts.Task(files)
	ctx, cancel := context.WithCancel(context.Background())
	exec, err := j.r.cfg.Starter.Start(ctx, task, j)
	if err != nil {
		cancel()
		j.fail(startError(j.log, err))
		return
	}
	j.mu.Lock()
	j.exec, j.cancel, j.interactive = exec, cancel, task.Interactive
	aborted := j.why != nil
	j.mu.Unlock()
	close(j.started)
	if aborted {
		cancel()
	}
	j.log.Info("backend: task started", "files", len(task.Files), "format", task.Format,
		"interactive", task.Interactive, "timeout", task.Timeout)
	go j.wait(exec, cancel)
}

// startError is the ending of a run the runner refused to start.
func startError(log *slog.Logger, err error) *ending {
	if errors.Is(err, sandbox.ErrInvalidTask) {
		return &ending{text: err.Error(), code: websocket.StatusPolicyViolation}
	}
	log.Error("backend: task did not start", "err", err)
	return &ending{text: backend.ErrStartFailed, code: websocket.StatusInternalError}
}

// wait records the outcome once the run is over.
func (j *job) wait(exec backend.Execution, cancel context.CancelFunc) {
	out := exec.Wait()
	cancel()
	j.mu.Lock()
	j.outcome = &out
	j.mu.Unlock()
	close(j.ended)
}

// fail ends a job whose run never started.
func (j *job) fail(e *ending) {
	j.mu.Lock()
	if j.why == nil {
		j.why = e
	}
	j.mu.Unlock()
	close(j.started)
	close(j.ended)
}

// abandon ends a job that has no run: a queue server that connected
// anyway gets complete with e.
func (j *job) abandon(e *ending) {
	go j.lifecycle()
	j.fail(e)
	j.abort(e)
	<-j.done
}

// lifecycle sends complete once the run is over and the queue server is
// connected, and closes done when the job is over.
func (j *job) lifecycle() {
	defer close(j.done)
	<-j.ended
	select {
	case <-j.connected:
	case <-j.expired:
		j.log.Info("backend: task ended without a connection", "reason", j.reason())
		return
	}
	j.complete()
	<-j.served
}

func (j *job) reason() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.why != nil {
		return j.why.text
	}
	return ""
}

// abort ends the job early for e (the first reason wins): the run is
// cancelled, and a connection can no longer come.
func (j *job) abort(e *ending) { j.end(e, false) }

// expire aborts the job for e unless the queue server connected.
func (j *job) expire(e *ending) { j.end(e, true) }

func (j *job) end(e *ending, onlyWaiting bool) {
	j.mu.Lock()
	if onlyWaiting && j.state != waiting {
		j.mu.Unlock()
		return
	}
	if j.why == nil {
		j.why = e
	}
	if j.state == waiting || j.state == claimed {
		j.state = expired
		close(j.expired)
	}
	cancel := j.cancel
	j.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// complete sends the job's complete message and closes the connection.
func (j *job) complete() {
	j.sendMu.Lock()
	defer j.sendMu.Unlock()
	j.mu.Lock()
	j.closing = true
	why, out, conn := j.why, j.outcome, j.conn
	j.mu.Unlock()
	if why != nil && why.silent {
		_ = conn.WebSocket().CloseNow()
		return
	}
	body, code, text := completion(why, out)
	j.log.Info("backend: task ended", "success", body.Success, "error", body.Error)
	ctx, cancel := context.WithTimeout(context.Background(), j.r.cfg.WriteTimeout)
	defer cancel()
	if err := conn.Send(ctx, backend.VerbComplete, body); err != nil {
		j.log.Info("backend: complete not sent", "err", err)
		_ = conn.WebSocket().CloseNow()
		return
	}
	_ = conn.WebSocket().Close(code, text)
}

// completion is the complete message for an early ending or an outcome,
// with the close code and reason.
func completion(why *ending, out *sandbox.Outcome) (backend.CompleteBody, websocket.StatusCode, string) {
	var body backend.CompleteBody
	code, text := websocket.StatusNormalClosure, ""
	if why != nil {
		body.Error, code, text = why.text, why.code, closeReason(why.text)
	} else if out != nil {
		body.Success, body.Error = out.Success, out.Error
	}
	if out != nil {
		ms := out.Time.Milliseconds()
		body.Time = &ms
	}
	return body, code, text
}

// closeReason fits text into a close frame (123 bytes).
func closeReason(text string) string {
	const limit = 123
	if len(text) <= limit {
		return text
	}
	cut := limit
	for cut > 0 && text[cut]&0xC0 == 0x80 {
		cut--
	}
	return text[:cut]
}

// Output implements sandbox.Sink: one output message, held until the
// queue server connects.
func (j *job) Output(stream string, data []byte) error {
	return j.send(backend.VerbOutput, backend.OutputBody{Stream: stream}, data)
}

// Result implements sandbox.Sink: one result message, held until the
// queue server connects.
func (j *job) Result(format string, image []byte) error {
	return j.send(backend.VerbResult, backend.ResultBody{Format: format}, image)
}

func (j *job) send(verb string, body any, payload []byte) error {
	j.sendMu.Lock()
	defer j.sendMu.Unlock()
	j.mu.Lock()
	conn := j.conn
	j.mu.Unlock()
	if conn == nil {
		j.pending = append(j.pending, heldMessage{verb: verb, body: body, payload: append([]byte(nil), payload...)})
		return nil
	}
	return j.sendNow(conn, heldMessage{verb: verb, body: body, payload: payload})
}

func (j *job) sendNow(conn *wire.Conn, m heldMessage) error {
	ctx, cancel := context.WithTimeout(context.Background(), j.r.cfg.WriteTimeout)
	defer cancel()
	if err := conn.SendPayload(ctx, m.verb, m.body, m.payload); err != nil {
		return fmt.Errorf("backendrole: %w", err)
	}
	return nil
}
