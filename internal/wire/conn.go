package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/coder/websocket"
)

// DefaultMaxHeader is the longest header a Conn reads unless told otherwise.
const DefaultMaxHeader = 16 << 10

// TooLargeError says a message was longer than the reader allowed. The
// reader stops at Limit+1 bytes: nothing beyond is buffered.
type TooLargeError struct {
	What  string // "header" or what the payload was for
	Limit int64
}

// Error names what was too large and the limit.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s longer than %d bytes", e.What, e.Limit)
}

// Conn carries headers and payloads over one WebSocket connection. Any
// number of goroutines may write; a header and its payload go out as one
// unit, never interleaved with another. One goroutine at a time may read.
type Conn struct {
	ws        *websocket.Conn
	known     []string
	maxHeader int64
	wmu       sync.Mutex
}

// NewConn wraps ws. Incoming headers must use one of the known verbs and
// be at most maxHeader bytes (DefaultMaxHeader when maxHeader <= 0).
func NewConn(ws *websocket.Conn, maxHeader int64, known ...string) *Conn {
	if maxHeader <= 0 {
		maxHeader = DefaultMaxHeader
	}
	return &Conn{ws: ws, known: known, maxHeader: maxHeader}
}

// WebSocket returns the underlying connection, to close it.
func (c *Conn) WebSocket() *websocket.Conn { return c.ws }

// Send writes a header alone: verb, or verb and body as JSON when body is
// not nil.
func (c *Conn) Send(ctx context.Context, verb string, body any) error {
	msg, err := FormatHeader(verb, body)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		return fmt.Errorf("send %s: %w", verb, err)
	}
	return nil
}

// SendPayload writes a header and then payload as a binary message, with
// no other message between them.
func (c *Conn) SendPayload(ctx context.Context, verb string, body any, payload []byte) error {
	msg, err := FormatHeader(verb, body)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		return fmt.Errorf("send %s: %w", verb, err)
	}
	if err := c.ws.Write(ctx, websocket.MessageBinary, payload); err != nil {
		return fmt.Errorf("send payload of %s: %w", verb, err)
	}
	return nil
}

// ReadHeader reads the next message, which must be a text header with a
// known verb. Protocol faults are *Error or *TooLargeError; any other error
// is the connection's.
func (c *Conn) ReadHeader(ctx context.Context) (Header, error) {
	typ, msg, err := c.read(ctx, c.maxHeader, "header")
	if err != nil {
		return Header{}, err
	}
	if typ != websocket.MessageText {
		return Header{}, errorf("binary message where a header is due")
	}
	return ParseHeader(msg, c.known...)
}

// ReadPayload reads the binary payload of the header h just read, at most
// limit bytes. A text message instead is an *Error naming h's verb; a longer
// payload is a *TooLargeError whose What is what.
func (c *Conn) ReadPayload(ctx context.Context, h Header, what string, limit int64) ([]byte, error) {
	typ, data, err := c.read(ctx, limit, what)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageBinary {
		return nil, errorf("missing payload of %q: a binary message must follow it", h.Verb)
	}
	return data, nil
}

// read reads one message of at most limit bytes, stopping at limit+1.
func (c *Conn) read(ctx context.Context, limit int64, what string) (websocket.MessageType, []byte, error) {
	// The library's own limit sits above ours so that it never closes the
	// connection itself: going past ours is answered by the caller.
	c.ws.SetReadLimit(limit + 1)
	typ, r, err := c.ws.Reader(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", what, err)
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return 0, nil, &TooLargeError{What: what, Limit: limit}
	}
	return typ, data, nil
}

// IsProtocol reports whether err is the peer's fault (an *Error or a
// *TooLargeError) rather than the connection's.
func IsProtocol(err error) bool {
	var pe *Error
	var te *TooLargeError
	return errors.As(err, &pe) || errors.As(err, &te)
}
