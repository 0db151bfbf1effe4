package backend

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
	"github.com/usherhq/usher/internal/wire"
)

// Caps of the test backends: small, so that going past them is cheap.
const (
	testMaxFiles  = 4
	testMaxUpload = 64 << 10
	testMaxInput  = 1 << 10
)

// newTestRunner returns the Starter every protocol test runs tasks with:
// the real sandboxed runner, on a work root the sandbox uid can reach.
func newTestRunner(t testing.TB) Starter {
	t.Helper()
	root := sandboxtest.WorkRoot(t)
	limits := sandbox.Limits{MaxTimeout: 20 * time.Second, Output: 1 << 20}
	r, err := sandbox.New(sandbox.Config{Limits: limits, WorkRoot: root})
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	return Sandbox(r)
}

// recorder wraps a Starter and records what the backend did with it: how
// many tasks it started and the outcome of each once Wait returned (which
// for the real runner means no process and no file of the task is left).
type recorder struct {
	Starter
	mu     sync.Mutex
	starts int
	tasks  chan sandbox.Task    // every task started
	waited chan sandbox.Outcome // every outcome
}

func (r *recorder) Start(ctx context.Context, t sandbox.Task, sink sandbox.Sink) (Execution, error) {
	e, err := r.Starter.Start(ctx, t, sink)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.starts++
	r.mu.Unlock()
	r.tasks <- t
	return &recordedExec{Execution: e, r: r}, nil
}

func (r *recorder) started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts
}

// start waits for the next task to start and returns it.
func (r *recorder) start(t testing.TB) sandbox.Task {
	t.Helper()
	select {
	case task := <-r.tasks:
		return task
	case <-time.After(30 * time.Second):
		t.Fatal("no task started")
		return sandbox.Task{}
	}
}

// ended waits for the next task to end and returns its outcome.
func (r *recorder) ended(t testing.TB, within time.Duration) sandbox.Outcome {
	t.Helper()
	select {
	case out := <-r.waited:
		return out
	case <-time.After(within):
		t.Fatalf("no task ended within %v", within)
		return sandbox.Outcome{}
	}
}

type recordedExec struct {
	Execution
	r    *recorder
	once sync.Once
}

func (e *recordedExec) Wait() sandbox.Outcome {
	out := e.Execution.Wait()
	e.once.Do(func() { e.r.waited <- out })
	return out
}

// testBackend is a Backend behind a real loopback HTTP server.
type testBackend struct {
	*Backend
	rec *recorder
	url string
}

func newTestBackend(t testing.TB, mutate ...func(*Config)) *testBackend {
	t.Helper()
	// Room for every task a test starts: a full buffer would block Start
	// (TestBadInput starts one or two per case).
	rec := &recorder{Starter: newTestRunner(t), tasks: make(chan sandbox.Task, 256), waited: make(chan sandbox.Outcome, 256)}
	return newTestBackendWith(t, rec, mutate...)
}

// newTestBackendWith serves a backend whose tasks go through rec.
func newTestBackendWith(t testing.TB, rec *recorder, mutate ...func(*Config)) *testBackend {
	t.Helper()
	cfg := Config{
		Starter: rec, MaxFiles: testMaxFiles, MaxUpload: testMaxUpload, MaxInput: testMaxInput,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		srv.Close()
	})
	return &testBackend{Backend: b, rec: rec, url: "ws" + strings.TrimPrefix(srv.URL, "http")}
}

// client is a protocol client over a real WebSocket.
type client struct {
	t    testing.TB
	ctx  context.Context
	ws   *websocket.Conn
	conn *wire.Conn
}

func (tb *testBackend) dial(t testing.TB) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, tb.url, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return &client{t: t, ctx: ctx, ws: ws, conn: wire.NewConn(ws, 0, Outgoing...)}
}

// send writes a header alone, body as JSON unless nil.
func (c *client) send(verb string, body any) {
	c.t.Helper()
	if err := c.conn.Send(c.ctx, verb, body); err != nil {
		c.t.Fatalf("send %s: %v", verb, err)
	}
}

// sendPayload writes a header and its binary payload.
func (c *client) sendPayload(verb string, body any, payload []byte) {
	c.t.Helper()
	if err := c.conn.SendPayload(c.ctx, verb, body, payload); err != nil {
		c.t.Fatalf("send %s: %v", verb, err)
	}
}

// raw writes one WebSocket message as it is.
func (c *client) raw(typ websocket.MessageType, data []byte) {
	c.t.Helper()
	if err := c.ws.Write(c.ctx, typ, data); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) add(name string, main bool, data string) {
	c.t.Helper()
	c.sendPayload(VerbAdd, map[string]any{"filename": name, "main": main}, []byte(data))
}

// message is one message the backend sent.
type message struct {
	verb    string
	body    json.RawMessage
	payload []byte
}

func (m message) complete(t testing.TB) CompleteBody {
	t.Helper()
	var c CompleteBody
	if m.verb != VerbComplete || json.Unmarshal(m.body, &c) != nil {
		t.Fatalf("got %s %s, want complete", m.verb, m.body)
	}
	return c
}

func (m message) String() string {
	return m.verb + " " + string(m.body) + " +" + strings.Repeat("b", min(len(m.payload), 1))
}

// next reads one message with its payload.
func (c *client) next() (message, error) {
	h, err := c.conn.ReadHeader(c.ctx)
	if err != nil {
		return message{}, err
	}
	m := message{verb: h.Verb, body: h.Body}
	if h.Verb == VerbResult || h.Verb == VerbOutput {
		m.payload, err = c.conn.ReadPayload(c.ctx, h, h.Verb, 64<<20)
	}
	return m, err
}

// until reads messages until one satisfies stop, and returns them all.
func (c *client) until(stop func(message) bool) []message {
	c.t.Helper()
	var got []message
	for {
		m, err := c.next()
		if err != nil {
			c.t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, m)
		if stop(m) {
			return got
		}
	}
}

// transcript reads every message until the backend closes the connection,
// and returns them with the close status.
func (c *client) transcript() ([]message, websocket.StatusCode) {
	c.t.Helper()
	var got []message
	for {
		m, err := c.next()
		if err != nil {
			status := websocket.CloseStatus(err)
			if status == -1 {
				c.t.Fatalf("after %v: not a close: %v", got, err)
			}
			return got, status
		}
		got = append(got, m)
	}
}

// last returns the final complete of a transcript, failing unless the
// transcript ends with one.
func last(t testing.TB, msgs []message) CompleteBody {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("no message before the close")
	}
	return msgs[len(msgs)-1].complete(t)
}

// countVerb counts the messages with verb.
func countVerb(msgs []message, verb string) int {
	n := 0
	for _, m := range msgs {
		if m.verb == verb {
			n++
		}
	}
	return n
}

// A small figure each format renders quickly.
const figure = "size(1cm);\ndraw(unitcircle);\n"

// A task that runs until its time limit.
const spin = "while(true) {}\n"

// runFigure runs figure on a fresh connection and checks it succeeds with
// one result: the backend works normally.
func (tb *testBackend) runFigure(t testing.TB, format string) []message {
	t.Helper()
	c := tb.dial(t)
	c.add("fig.asy", true, figure)
	c.send(VerbOptions, map[string]any{"format": format})
	c.send(VerbRun, nil)
	msgs, status := c.transcript()
	done := last(t, msgs)
	if !done.Success || done.Error != "" || done.Time == nil {
		t.Fatalf("figure as %s: %+v after %v", format, done, msgs)
	}
	if status != websocket.StatusNormalClosure {
		t.Fatalf("figure as %s: closed with %v, want normal closure", format, status)
	}
	return msgs
}

func testContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
