// Package asyclient is a client of the queue protocol (/asy): it
// sends a task's files and options, then reads the queue's and the run's
// messages until `complete` or `denied`. Load generators and multi-node
// tests use it; docs/protocol.md describes the protocol.
package asyclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/uploads"
	"github.com/usherhq/usher/internal/wire"
)

// File is one source file of a task.
type File struct {
	Name string
	Data []byte
	Main bool
}

// Options are the task's options; zero fields are not sent.
type Options struct {
	Timeout     time.Duration // a tier's duration; 0 for a default task
	Format      string
	Interactive bool
}

// Message is one message from the server, decoded.
type Message struct {
	Verb string
	// queue
	Passed   bool
	Estimate *time.Duration
	Position *int
	// complete and denied
	Success bool
	Error   string
	Time    time.Duration
	// output and result: the label and the bytes
	Stream, Format string
	Payload        []byte
}

// Final says whether m ends the task.
func (m Message) Final() bool { return m.Verb == "complete" || m.Verb == "denied" }

// Conn is one task's connection.
type Conn struct {
	ws   *websocket.Conn
	conn *wire.Conn
}

// Dial connects to a queue server's /asy, e.g. ws://host:port/asy.
func Dial(ctx context.Context, url string) (*Conn, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.SetReadLimit(64 << 20)
	return &Conn{ws: ws, conn: wire.NewConn(ws, 1<<20, "queue", "missing", "result", "output", "complete", "denied")}, nil
}

// Close ends the connection at once (a client that leaves).
func (c *Conn) Close() { c.ws.CloseNow() }

// Submit sends the files, the options and `run`.
func (c *Conn) Submit(ctx context.Context, files []File, o Options) error {
	for _, f := range files {
		body := map[string]any{"filename": f.Name, "main": f.Main, "hash": uploads.Hash(f.Data)}
		if err := c.conn.SendPayload(ctx, "add", body, f.Data); err != nil {
			return fmt.Errorf("add %s: %w", f.Name, err)
		}
	}
	opts := map[string]any{}
	if o.Timeout > 0 {
		opts["timeout"] = o.Timeout.Milliseconds()
	}
	if o.Format != "" {
		opts["format"] = o.Format
	}
	if o.Interactive {
		opts["interactive"] = true
	}
	if len(opts) > 0 {
		if err := c.conn.Send(ctx, "options", opts); err != nil {
			return fmt.Errorf("options: %w", err)
		}
	}
	if err := c.conn.Send(ctx, "run", nil); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}

type fields struct {
	Passed   *bool   `json:"passed"`
	Estimate *int64  `json:"estimate"`
	Position *int    `json:"position"`
	Success  *bool   `json:"success"`
	Error    *string `json:"error"`
	Time     *int64  `json:"time"`
	Format   *string `json:"format"`
	Stream   *string `json:"stream"`
}

// Next reads the next message.
func (c *Conn) Next(ctx context.Context) (Message, error) {
	h, err := c.conn.ReadHeader(ctx)
	if err != nil {
		return Message{}, err
	}
	var f fields
	if err := wire.Decode(h, &f, "field"); err != nil {
		return Message{}, fmt.Errorf("%s: %w", h.Verb, err)
	}
	m := Message{Verb: h.Verb}
	switch h.Verb {
	case "queue":
		m.Passed = f.Passed != nil && *f.Passed
		if f.Estimate != nil {
			d := time.Duration(*f.Estimate) * time.Millisecond
			m.Estimate = &d
		}
		m.Position = f.Position
	case "complete", "denied":
		m.Success = f.Success != nil && *f.Success
		if f.Error != nil {
			m.Error = *f.Error
		}
		if f.Time != nil {
			m.Time = time.Duration(*f.Time) * time.Millisecond
		}
	case "output", "result":
		if f.Stream != nil {
			m.Stream = *f.Stream
		}
		if f.Format != nil {
			m.Format = *f.Format
		}
		if m.Payload, err = c.conn.ReadPayload(ctx, h, h.Verb, 64<<20); err != nil {
			return m, fmt.Errorf("%s payload: %w", h.Verb, err)
		}
	case "missing":
		return m, errors.New("the server asked for missing files; this client never restores")
	}
	return m, nil
}

// Compile runs one task on url and returns every message up to and
// including the final `complete` or `denied`.
func Compile(ctx context.Context, url string, files []File, o Options) ([]Message, error) {
	c, err := Dial(ctx, url)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Submit(ctx, files, o); err != nil {
		return nil, err
	}
	var all []Message
	for {
		m, err := c.Next(ctx)
		if err != nil {
			return all, err
		}
		all = append(all, m)
		if m.Final() {
			return all, nil
		}
	}
}
