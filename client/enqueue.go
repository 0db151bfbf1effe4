package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"time"

	"github.com/usherhq/usher/internal/telemetry"
	"github.com/usherhq/usher/jobtype"
)

// enqueueTries is how often EnqueueAnswer sends a request whose answer
// was lost or was a server-side failure, and enqueueMaxWait the longest
// wait between tries.
const (
	enqueueTries   = 5
	enqueueMaxWait = 2 * time.Second
)

// EnqueueAnswer submits jobs, all or none, and returns their ids in the
// given order; Existing marks the jobs that were there before (a repeated
// idempotency key, or a unique job alike).
//
// The request carries an idempotency key of its own, random (32 hex
// digits), in its Idempotency-Key header, so that trying again after a
// lost answer never creates a job twice: a transport error, 408, 429 or
// 5xx is tried again with the same key, up to 5 tries with backoff (0.1 s
// doubling, at most 2 s), while ctx lasts. The server keeps keys for 24 h
// by default.
//
// A job without a Traceparent gets the one of ctx's span, if any, so that
// its handler's span joins the caller's trace.
func (c *Client) EnqueueAnswer(ctx context.Context, jobs ...JobSpec) (EnqueueAnswer, error) {
	in := jobtype.EnqueueRequest{Jobs: withTrace(ctx, jobs)}
	hdr := http.Header{jobtype.IdempotencyKeyHeader: {newKey()}}
	var out jobtype.EnqueueAnswer
	var err error
	for try := 0; try < enqueueTries; try++ {
		if try > 0 && !sleep(ctx, backoff(try-1, enqueueMaxWait)) {
			return out, err
		}
		out = jobtype.EnqueueAnswer{}
		err = c.callWith(ctx, http.MethodPost, "/v1/jobs", hdr, in, &out)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return out, err
		}
	}
	return out, err
}

// withTrace gives the jobs without a trace context the one of ctx, in a
// copy; the caller's slice is left alone.
func withTrace(ctx context.Context, jobs []JobSpec) []JobSpec {
	tp := telemetry.Traceparent(ctx)
	if tp == "" {
		return jobs
	}
	out := slices.Clone(jobs)
	for i := range out {
		if out[i].Traceparent == "" {
			out[i].Traceparent = tp
		}
	}
	return out
}

// newKey is a random idempotency key.
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}
