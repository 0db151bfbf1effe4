package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// errUnreachable marks a request that got no answer: the server is down
// (killed, or being restarted).
var errUnreachable = errors.New("server unreachable")

// statusError is an answer with an unexpected status.
type statusError struct {
	method, path string
	status       int
	body         string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: status %d: %s", e.method, e.path, e.status, e.body)
}

// client speaks the /v1 API as raw HTTP JSON with one token, to whichever
// server is up.
type client struct {
	hc    *http.Client
	base  func() string
	token string
}

// newHTTPClient keeps enough idle connections for every agent slot.
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
	return &http.Client{Transport: tr}
}

// call sends one request with in as its JSON body (nil: none), and decodes
// a JSON answer into out when the status is want. A request that reaches
// no server fails with errUnreachable; another status with *statusError.
func (c *client) call(ctx context.Context, method, path string, in, out any, want int) error {
	base := c.base()
	if base == "" {
		return fmt.Errorf("%s %s: %w", method, path, errUnreachable)
	}
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encoding the body: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w: %v", method, path, errUnreachable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w: %v", method, path, errUnreachable, err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && want != http.StatusServiceUnavailable {
		// Multi-node mode while no scheduler leads: it may have seen it.
		return fmt.Errorf("%s %s: %w: 503 %s", method, path, errUnreachable, data)
	}
	if resp.StatusCode != want {
		return &statusError{method: method, path: path, status: resp.StatusCode, body: string(data)}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding %q: %w", method, path, data, err)
		}
	}
	return nil
}

// retryBackoff is how long a caller waits before asking again a server
// that did not answer.
const retryBackoff = 20 * time.Millisecond

// do is call, repeated while the server is unreachable. It reports whether
// some attempt went unanswered, so that a caller can tell "the server
// never saw it" from "the server may have seen it".
func (c *client) do(ctx context.Context, method, path string, in, out any, want int) (missed bool, err error) {
	for {
		err := c.call(ctx, method, path, in, out, want)
		if !errors.Is(err, errUnreachable) || ctx.Err() != nil {
			return missed, err
		}
		missed = true
		select {
		case <-ctx.Done():
			return missed, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		case <-time.After(retryBackoff):
		}
	}
}

// must is do for callers that only care about success.
func (c *client) must(ctx context.Context, method, path string, in, out any, want int) error {
	_, err := c.do(ctx, method, path, in, out, want)
	return err
}
