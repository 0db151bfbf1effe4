package backendrole

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/internal/wire"
)

// Output and results of a run that is over before the queue server
// connects are held, and sent in order when it does, then complete.
func TestOutputHeldUntilConnectionPlayingTheQueueServer(t *testing.T) {
	e := newEnv(t)
	tr := e.startRole()
	id := e.schedule(svgTask().Fields(), "write(\"before\");\n"+figure+"write(\"after\");\n")
	url := e.address(id)
	if out := tr.ranOutcome(t); !out.Success {
		t.Fatalf("run %+v", out)
	}
	msgs, status := transcript(t, url, nil)
	// asy writes its image at the end: the output, then the result, then
	// complete (output batched into as few messages as the runner likes).
	var verbs []string
	text := ""
	for _, m := range msgs {
		if len(verbs) == 0 || verbs[len(verbs)-1] != m.verb {
			verbs = append(verbs, m.verb)
		}
		if m.verb == backend.VerbOutput {
			text += string(m.payload)
		}
	}
	if text != "before\nafter\n" || strings.Join(verbs, " ") != "output result complete" || status != websocket.StatusNormalClosure {
		t.Fatalf("output %q, verbs %v, close %v", text, verbs, status)
	}
	var c backend.CompleteBody
	if err := json.Unmarshal(msgs[len(msgs)-1].body, &c); err != nil || !c.Success || c.Time == nil {
		t.Fatalf("complete %s", msgs[len(msgs)-1].body)
	}
}

// A message the backend does not take from the queue server ends the
// task with complete and the error, and aborts the run.
func TestQueueServerMistakesPlayingTheQueueServer(t *testing.T) {
	tests := []struct {
		name string
		send func(context.Context, *wire.Conn) error
		want string
	}{
		{"add", func(ctx context.Context, c *wire.Conn) error {
			return c.SendPayload(ctx, backend.VerbAdd, map[string]any{"filename": "x.asy"}, []byte("x"))
		}, `unknown message "add"`},
		{"options format", func(ctx context.Context, c *wire.Conn) error {
			return c.Send(ctx, backend.VerbOptions, map[string]any{"format": "png"})
		}, `option "format" cannot change after run`},
		{"zero timeout", func(ctx context.Context, c *wire.Conn) error {
			return c.Send(ctx, backend.VerbOptions, map[string]any{"timeout": 0})
		}, backend.ErrBadTimeout},
		{"input to a batch task", func(ctx context.Context, c *wire.Conn) error {
			return c.SendPayload(ctx, backend.VerbInput, nil, []byte("1;\n"))
		}, backend.ErrInputNotInteractive},
	}
	e := newEnv(t)
	tr := e.startRole()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := e.schedule(svgTask().Fields(), spin)
			msgs, status := transcript(t, e.address(id), tt.send)
			var c backend.CompleteBody
			if len(msgs) == 0 || msgs[len(msgs)-1].verb != "complete" || json.Unmarshal(msgs[len(msgs)-1].body, &c) != nil {
				t.Fatalf("messages %v", msgs)
			}
			if c.Success || c.Error == "" || !strings.Contains(c.Error, tt.want) || status != websocket.StatusPolicyViolation {
				t.Fatalf("complete %+v close %v, want error with %q", c, status, tt.want)
			}
			if out := tr.ranOutcome(t); out.Time >= testMaxTimeout/2 {
				t.Fatalf("run not aborted: %+v", out)
			}
			if got := e.finished(10 * time.Second); got != id {
				t.Fatalf("queue.finished got %q, want %s", got, id)
			}
		})
	}
}

// The scheduler's timeout in the task hash bounds the run.
func TestHashTimeoutBoundsTheRunPlayingTheScheduler(t *testing.T) {
	e := newEnv(t)
	e.startRole()
	fields := svgTask().Fields()
	fields[redisq.FieldTimeout] = 400
	id := e.schedule(fields, spin)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exec, _ := attach(t, ctx, e.address(id))
	if out := exec.Wait(); out.Error != "Execution aborted due to the time limit (400ms)" {
		t.Fatalf("outcome %+v", out)
	}
}

// /readyz: ready while idle, busy while a task holds the backend.
func TestReadyz(t *testing.T) {
	e := newEnv(t)
	tr := e.startRole()
	ready := func() int {
		resp, err := http.Get(tr.base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := ready(); s != 200 {
		t.Fatalf("idle readyz %d", s)
	}
	id := e.schedule(svgTask().Fields(), spin)
	url := e.address(id)
	if s := ready(); s != http.StatusServiceUnavailable {
		t.Fatalf("busy readyz %d", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exec, _ := attach(t, ctx, url)
	exec.Shorten(100 * time.Millisecond)
	exec.Wait()
	e.finished(10 * time.Second)
	testwait.Eventually(t, 10*time.Second, func() bool { return ready() == 200 }, "/readyz answering 200 again")
}

// heard is one message the backend sent.
type heard struct {
	verb    string
	body    json.RawMessage
	payload []byte
}

func (m heard) String() string { return m.verb + " " + string(m.body) }

// transcript dials url as a raw queue server, sends what send sends, and
// reads every message until the close.
func transcript(t *testing.T, url string, send func(context.Context, *wire.Conn) error) ([]heard, websocket.StatusCode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	conn := wire.NewConn(ws, 0, backend.Outgoing...)
	if send != nil {
		if err := send(ctx, conn); err != nil {
			t.Fatal(err)
		}
	}
	var got []heard
	for {
		h, err := conn.ReadHeader(ctx)
		if err != nil {
			status := websocket.CloseStatus(err)
			if status == -1 {
				t.Fatalf("after %v: %v", got, err)
			}
			return got, status
		}
		m := heard{verb: h.Verb, body: h.Body}
		if h.Verb != backend.VerbComplete {
			if m.payload, err = conn.ReadPayload(ctx, h, h.Verb, 64<<20); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, m)
	}
}
