// Package client is the Go client of usher's generic-jobs API (/v1,
// docs/api.md): one method per endpoint with typed requests and answers,
// and a Worker that runs jobs with handlers per queue, so that a Go program
// can submit work or serve it without the HTTP details.
//
//	c := client.New("http://localhost:8080", os.Getenv("USHER_TOKEN"))
//	ids, err := c.Enqueue(ctx, client.JobSpec{Queue: "scan", Payload: json.RawMessage(`"10.1.2.3"`)})
//
// Errors the server answers come back as *Error (use errors.As); transport
// errors are wrapped with the method and URL. Every method takes a context
// for cancellation; the client sets no timeout of its own (a lease may
// long-poll for up to a minute).
//
// One Client is safe for concurrent use and should be shared: every Client
// made without WithHTTPClient uses one package-wide transport that keeps
// connections alive, with enough idle connections per host for thousands of
// calls in flight.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/usherhq/usher/internal/telemetry"
)

// sharedHTTP is the HTTP client of every Client made without
// WithHTTPClient: one transport, one pool of kept-alive connections.
var sharedHTTP = &http.Client{Transport: newTransport()}

func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2048
	t.MaxIdleConnsPerHost = 1024
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// Client calls one usher server's /v1 API with one token. It is safe for
// concurrent use.
type Client struct {
	base string // without a trailing slash
	auth string // "Bearer <token>", or "" for none
	hc   *http.Client
}

// Option configures a Client made by New.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc instead of
// the package's shared HTTP client (for a proxy, TLS settings or a test
// transport). hc should not set a Timeout shorter than the longest lease
// wait (60 s); use contexts instead.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// New returns a client of the server at baseURL (e.g.
// "http://localhost:8080") that authenticates with token (sent as
// "Authorization: Bearer <token>"; an empty token sends none).
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: sharedHTTP}
	if token != "" {
		c.auth = "Bearer " + token
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL is the server address the client calls, as given to New without
// a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Error is an error answer of the server: its HTTP status and the text of
// its {"error": "..."} body. Cycle lists the jobs of a dependency cycle
// when a workflow was refused for one.
type Error struct {
	Status  int
	Message string
	Cycle   []string
}

// Error returns the server's text and the status.
func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.Status, http.StatusText(e.Status))
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0 when
// err is nil or did not come from a server answer.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// bufPool holds the buffers that answers are read into; answers are
// decoded from them and every decoded value is a copy.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooled is the largest buffer put back into bufPool, so that one huge
// answer does not pin its memory.
const maxPooled = 1 << 20

// call sends a request with in as its JSON body (nil: none) and decodes a
// 2xx answer into out (nil: the body is discarded).
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	return c.callWith(ctx, method, path, nil, in, out)
}

// callWith is call with extra request headers.
func (c *Client) callWith(ctx context.Context, method, path string, hdr http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	return c.sendWith(ctx, method, path, "application/json", hdr, body, out)
}

// send performs one request and decodes its answer; contentType names the
// body's type when body is not nil.
func (c *Client) send(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	return c.sendWith(ctx, method, path, contentType, nil, body, out)
}

// sendWith is send with extra request headers.
func (c *Client) sendWith(ctx context.Context, method, path, contentType string, hdr http.Header, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	telemetry.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	defer resp.Body.Close()
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuf(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp.StatusCode, buf.Bytes())
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(buf.Bytes(), out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooled {
		bufPool.Put(b)
	}
}

// decodeError turns an error answer into *Error; a body that is not the
// API's {"error": ...} becomes the message as text.
func decodeError(status int, body []byte) error {
	var e struct {
		Error string   `json:"error"`
		Cycle []string `json:"cycle"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return &Error{Status: status, Message: e.Error, Cycle: e.Cycle}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	if msg == "" {
		msg = strings.ToLower(http.StatusText(status))
	}
	return &Error{Status: status, Message: msg}
}
