package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/jobtype"
)

// lostAnswerTransport is a fault the real parts cannot produce on
// demand: it passes each request to the real server but, for the first
// lose enqueues, throws the server's answer away and reports a broken
// connection, as a network that fails after the server acted does.
type lostAnswerTransport struct {
	lose atomic.Int32
	sent atomic.Int32 // enqueue requests that reached the server
	mu   sync.Mutex
	keys []string // the Idempotency-Key of each enqueue request
}

func (l *lostAnswerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || req.URL.Path != "/v1/jobs" {
		return resp, err
	}
	l.sent.Add(1)
	l.mu.Lock()
	l.keys = append(l.keys, req.Header.Get(jobtype.IdempotencyKeyHeader))
	l.mu.Unlock()
	if l.lose.Add(-1) >= 0 {
		resp.Body.Close()
		return nil, errors.New("connection reset by peer (answer lost by the test)")
	}
	return resp, nil
}

// When the answer of an enqueue is lost after the server created the
// jobs, the client tries again with the same request key it chose:
// the jobs exist once, and the ids it returns are theirs.
func TestEnqueueRetryAfterALostAnswerCreatesNothingTwice(t *testing.T) {
	srv := jobsapitest.Start(t)
	ctx := t.Context()
	tr := &lostAnswerTransport{}
	c := client.New(srv.URL, srv.AdminToken, client.WithHTTPClient(&http.Client{Transport: tr}))
	if _, err := c.CreateQueue(ctx, client.QueueSpec{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	specs := []client.JobSpec{{Queue: "q", Payload: []byte(`1`)}, {Queue: "q", Payload: []byte(`2`), IdempotencyKey: "mine"}}
	tr.lose.Store(2)
	ids, err := c.Enqueue(ctx, specs...)
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.sent.Load(); n != 3 {
		t.Fatalf("%d enqueue requests reached the server; want 3 (two answers lost)", n)
	}
	if !slices.Equal(ids, []string{"1", "2"}) {
		t.Fatalf("ids = %v; want [1 2], the jobs of the first try", ids)
	}
	page, err := c.Jobs(ctx, client.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 2 {
		t.Fatalf("the server holds %d jobs; want 2", len(page.Jobs))
	}
	if k := tr.keys; len(k[0]) != 32 || strings.Trim(k[0], "0123456789abcdef") != "" || k[1] != k[0] || k[2] != k[0] {
		t.Fatalf("request keys of the three tries = %q; want one key of 32 hex digits", k)
	}
	if page.Jobs[0].IdempotencyKey != "" || page.Jobs[1].IdempotencyKey != "mine" {
		t.Fatalf("jobs' keys = %q, %q; want none (the key is the request's) and the caller's", page.Jobs[0].IdempotencyKey, page.Jobs[1].IdempotencyKey)
	}
	// A refusal is not tried again.
	tr.sent.Store(0)
	if _, err := c.Enqueue(ctx, client.JobSpec{Queue: "nope"}); client.StatusOf(err) != 400 || tr.sent.Load() != 1 {
		t.Fatalf("unknown queue: %v after %d requests; want one 400", err, tr.sent.Load())
	}
	// A context that ends stops the retries.
	tr.lose.Store(1000)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Enqueue(cctx, client.JobSpec{Queue: "q"}); err == nil {
		t.Fatal("enqueue with an ended context succeeded")
	}
}
