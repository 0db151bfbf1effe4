package service

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/uploads"
	"github.com/usherhq/usher/internal/wire"
)

// msg is one message a client received: a header and its payload, if any.
type msg struct {
	verb    string
	body    map[string]any
	list    []any // the body of `missing`
	payload []byte
}

// client speaks the /asy protocol as a browser would.
type client struct {
	t    testing.TB
	ctx  context.Context
	conn *wire.Conn
}

func dial(t testing.TB, srv *httptest.Server) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/asy"
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &client{t: t, ctx: ctx, conn: wire.NewConn(ws, 1<<20, "queue", "missing", "result", "output", "complete", "denied")}
}

func (c *client) add(name, source string, main bool) {
	c.t.Helper()
	body := map[string]any{"filename": name, "main": main, "hash": uploads.Hash([]byte(source))}
	if err := c.conn.SendPayload(c.ctx, "add", body, []byte(source)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) restore(name, source string, main bool) {
	c.t.Helper()
	body := map[string]any{"filename": name, "main": main, "hash": uploads.Hash([]byte(source)), "restore": true}
	c.send("add", body)
}

func (c *client) send(verb string, body any) {
	c.t.Helper()
	if err := c.conn.Send(c.ctx, verb, body); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) sendRaw(typ websocket.MessageType, data []byte) {
	c.t.Helper()
	if err := c.conn.WebSocket().Write(c.ctx, typ, data); err != nil {
		c.t.Fatal(err)
	}
}

// next reads one message; ok is false once the server has closed.
func (c *client) next() (m msg, ok bool) {
	c.t.Helper()
	h, err := c.conn.ReadHeader(c.ctx)
	if err != nil {
		if websocket.CloseStatus(err) == -1 && !strings.Contains(err.Error(), "EOF") {
			c.t.Fatalf("read: %v", err)
		}
		return msg{}, false
	}
	m.verb = h.Verb
	if len(h.Body) > 0 && h.Body[0] == '[' {
		_ = json.Unmarshal(h.Body, &m.list)
	} else if len(h.Body) > 0 {
		_ = json.Unmarshal(h.Body, &m.body)
	}
	if m.verb == "result" || m.verb == "output" {
		if m.payload, err = c.conn.ReadPayload(c.ctx, h, "payload", 64<<20); err != nil {
			c.t.Fatalf("payload of %s: %v", m.verb, err)
		}
	}
	return m, true
}

// until reads messages up to and including the first with verb.
func (c *client) until(verb string) (seen []msg, last msg) {
	c.t.Helper()
	for {
		m, ok := c.next()
		if !ok {
			c.t.Fatalf("connection closed before %q; saw %v", verb, verbs(seen))
		}
		seen = append(seen, m)
		if m.verb == verb {
			return seen, m
		}
	}
}

// rest reads every message until the server closes.
func (c *client) rest() []msg {
	c.t.Helper()
	var all []msg
	for {
		m, ok := c.next()
		if !ok {
			return all
		}
		all = append(all, m)
	}
}

func (c *client) close() { c.conn.WebSocket().Close(websocket.StatusNormalClosure, "") }

func verbs(ms []msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.verb
	}
	return out
}

// compile sends one main file with options and runs it.
func (c *client) compile(source string, options map[string]any) {
	c.t.Helper()
	c.add("main.asy", source, true)
	if options != nil {
		c.send("options", options)
	}
	c.send("run", nil)
}

// final returns the last message, which must be complete or denied, and
// checks that the server closed after it.
func final(t testing.TB, all []msg) msg {
	t.Helper()
	if len(all) == 0 {
		t.Fatal("no messages before close")
	}
	last := all[len(all)-1]
	if last.verb != "complete" && last.verb != "denied" {
		t.Fatalf("last message %q, want complete or denied; saw %v", last.verb, verbs(all))
	}
	return last
}
