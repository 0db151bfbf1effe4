package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/testwait"
)

// pair returns the two ends of a real loopback WebSocket connection: the
// server's and the client's.
func pair(t *testing.T) (server, client *websocket.Conn) {
	t.Helper()
	accepted := make(chan *websocket.Conn, 1)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		accepted <- ws
		<-done // keep the handler, and so the connection, alive
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { client.CloseNow() })
	server = testwait.Receive(t, 10*time.Second, accepted, "the server accepting the connection")
	t.Cleanup(func() { server.CloseNow() })
	return server, client
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Many goroutines writing header+payload units at once: the reader sees
// every payload right after its own header.
func TestConnUnitsNeverInterleave(t *testing.T) {
	server, client := pair(t)
	ctx := testCtx(t)
	out := NewConn(server, 0)
	in := NewConn(client, 0, "output")
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				body := map[string]int{"w": w, "i": i}
				payload := bytes.Repeat([]byte{byte('a' + w)}, 100+i)
				if err := out.SendPayload(ctx, "output", body, payload); err != nil {
					t.Errorf("send: %v", err)
					return
				}
			}
		})
	}
	for range writers * each {
		h, err := in.ReadHeader(ctx)
		if err != nil {
			t.Fatalf("read header: %v", err)
		}
		var body struct {
			W *int `json:"w"`
			I *int `json:"i"`
		}
		if err := Decode(h, &body, "field"); err != nil {
			t.Fatalf("decode %s: %v", h.Body, err)
		}
		p, err := in.ReadPayload(ctx, h, "output", 1<<20)
		if err != nil {
			t.Fatalf("read payload after %s: %v", h.Body, err)
		}
		want := bytes.Repeat([]byte{byte('a' + *body.W)}, 100+*body.I)
		if !bytes.Equal(p, want) {
			t.Fatalf("payload after %s is %q…, not its own", h.Body, p[:min(len(p), 10)])
		}
	}
	wg.Wait()
}

// Each fault of the peer is a protocol error with its text, and the
// connection can still carry the reply.
func TestConnReadFaults(t *testing.T) {
	type msg struct {
		typ  websocket.MessageType
		data []byte
	}
	text := func(s string) msg { return msg{websocket.MessageText, []byte(s)} }
	binary := func(b []byte) msg { return msg{websocket.MessageBinary, b} }
	tests := []struct {
		name  string
		send  []msg
		limit int64 // payload limit
		err   string
	}{
		{name: "binary where a header is due", send: []msg{binary([]byte("x"))}, err: "binary message where a header is due"},
		{name: "text where a payload is due", send: []msg{text("add"), text("run")}, limit: 10, err: `missing payload of "add": a binary message must follow it`},
		{name: "header over the limit", send: []msg{text("add " + `{"x":"` + strings.Repeat("y", 64) + `"}`)}, err: "header longer than 64 bytes"},
		{name: "payload over the limit", send: []msg{text("add"), binary(make([]byte, 11))}, limit: 10, err: "file longer than 10 bytes"},
		{name: "payload far over the limit", send: []msg{text("add"), binary(make([]byte, 1<<20))}, limit: 10, err: "file longer than 10 bytes"},
		{name: "unknown verb", send: []msg{text("remove")}, err: `unknown message "remove"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, client := pair(t)
			ctx := testCtx(t)
			for _, m := range tt.send {
				if err := client.Write(ctx, m.typ, m.data); err != nil {
					t.Fatalf("client write: %v", err)
				}
			}
			in := NewConn(server, 64, "add")
			h, err := in.ReadHeader(ctx)
			if err == nil {
				_, err = in.ReadPayload(ctx, h, "file", tt.limit)
			}
			if err == nil || !IsProtocol(err) || err.Error() != tt.err {
				t.Fatalf("read error = %v, want protocol error %q", err, tt.err)
			}
			if err := in.Send(ctx, "complete", map[string]any{"success": false, "error": err.Error()}); err != nil {
				t.Fatalf("reply after the fault: %v", err)
			}
			reply := NewConn(client, 0, "complete")
			got, err := reply.ReadHeader(ctx)
			if err != nil || got.Verb != "complete" {
				t.Fatalf("client did not get the reply: %v %v", got, err)
			}
		})
	}
}

// A payload of exactly the limit is accepted, and so is an empty one.
func TestConnPayloadAtTheLimit(t *testing.T) {
	server, client := pair(t)
	ctx := testCtx(t)
	out, in := NewConn(client, 0), NewConn(server, 0, "add")
	for _, size := range []int{10, 0} {
		if err := out.SendPayload(ctx, "add", nil, bytes.Repeat([]byte("z"), size)); err != nil {
			t.Fatal(err)
		}
		h, err := in.ReadHeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p, err := in.ReadPayload(ctx, h, "file", 10)
		if err != nil || len(p) != size {
			t.Fatalf("payload of %d bytes with limit 10: %d bytes, %v", size, len(p), err)
		}
	}
}

// A closed connection is not a protocol error.
func TestConnClosedIsNotProtocol(t *testing.T) {
	server, client := pair(t)
	ctx := testCtx(t)
	read := make(chan error, 1)
	go func() {
		_, err := NewConn(server, 0, "add").ReadHeader(ctx)
		read <- err
	}()
	if err := client.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	err := testwait.Receive(t, 10*time.Second, read, "the pending read returning after the close")
	if err == nil || IsProtocol(err) {
		t.Fatalf("read after close = %v, want a connection error", err)
	}
	var pe *Error
	if errors.As(err, &pe) {
		t.Fatal(fmt.Sprint("closed connection reported as ", pe))
	}
}
